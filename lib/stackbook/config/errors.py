"""Campaign errors that name the file, the field as the user wrote it, and the fix.

Hints come from the schema itself: at every error location the models are walked from the
root (nested models, lists, mappings, discriminated unions) to learn which fields and which
`kind` tags are allowed there, so a new engine or arrival kind needs no edit here."""
from __future__ import annotations

import difflib
import types
import typing
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, Discriminator, ValidationError
from pydantic.fields import FieldInfo


class CampaignError(ValueError):
    """A campaign file that cannot run; the message names the file, the field and the fix."""


# Fixes by pydantic error type, where the type alone says what to do.
FIXES = {
    "extra_forbidden": "remove it, or check its spelling against the campaign reference in docs/campaigns.md",
    "missing": "add it",
    "literal_error": "use one of the allowed values above",
    "int_parsing": "give a whole number",
    "int_type": "give a whole number",
    "float_parsing": "give a number",
    "float_type": "give a number",
    "greater_than": "give a larger value",
    "greater_than_equal": "give a larger value",
    "less_than_equal": "give a smaller value",
    "list_type": "give a YAML list, e.g. [1, 4]",
    "string_type": "give a text value",
    "bool_type": "give true or false",
    "string_pattern_mismatch": "use letters, digits, '-', '_' or '.' only",
    "too_short": "give at least one entry",
    "model_type": "give a mapping (key: value lines)",
}


@dataclass(frozen=True)
class Place:
    """What the schema allows at one error location."""
    path: str                       # as written in the file: keys and [index], no union tags
    fields: tuple[str, ...] = ()    # the fields of the model here (of the chosen member, in a union)
    kinds: tuple[str, ...] = ()     # the tags a union here accepts
    discriminator: str = "kind"     # the field that carries those tags
    # For the chosen member of a union: the fields of every member of that union, by tag.
    fields_by_kind: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class _Node:
    """A point in the schema: a type, and the discriminator when it is a tagged union."""
    tp: Any
    discriminator: str | None = None


def _unwrap(tp: Any, discriminator: str | None = None) -> _Node:
    """Strip Annotated layers, keeping the discriminator they declare."""
    while typing.get_origin(tp) is Annotated:
        tp, *meta = typing.get_args(tp)
        for m in meta:
            d = m.discriminator if isinstance(m, (FieldInfo, Discriminator)) else None
            if isinstance(d, Discriminator):
                d = d.discriminator
            if isinstance(d, str):
                discriminator = d
    return _Node(tp, discriminator)


def _members(node: _Node) -> list[Any] | None:
    """The non-None members of a union, or None when the node is not a union. A tagged union of
    one member (Union[X] is X itself) is still a union: its tag appears in error locations."""
    if typing.get_origin(node.tp) not in (Union, types.UnionType):
        return [node.tp] if node.discriminator and _is_model(node.tp) else None
    return [_unwrap(a).tp for a in typing.get_args(node.tp) if a is not type(None)]


def _tags(member: Any, discriminator: str) -> tuple[str, ...]:
    """The values a union member's Literal tag field accepts."""
    info = member.model_fields.get(discriminator) if _is_model(member) else None
    if info is None or typing.get_origin(info.annotation) is not Literal:
        return ()
    return tuple(str(v) for v in typing.get_args(info.annotation))


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _step(node: _Node, part: str | int) -> tuple[_Node | None, bool]:
    """The node one location part below `node`, and whether the part is a union tag (which the
    user never wrote as a key, so it is left out of the path)."""
    members = _members(node)
    if members is not None:
        disc = node.discriminator or "kind"
        for m in members:
            if part in _tags(m, disc) or part == getattr(m, "__name__", None):
                return _Node(m), True
        if len(members) == 1:  # an optional value: the part belongs to the value itself
            return _step(_Node(members[0]), part)
        return None, False
    if _is_model(node.tp):
        info = node.tp.model_fields.get(str(part))
        return (_unwrap(info.annotation, info.discriminator) if info else None), False
    origin, args = typing.get_origin(node.tp), typing.get_args(node.tp)
    if origin in (list, tuple, set, frozenset) and args and isinstance(part, int):
        return _unwrap(args[0]), False
    if origin is dict and len(args) == 2:
        return _unwrap(args[1]), False
    return None, False


def locate(root: type[BaseModel], loc: tuple) -> Place:
    """Follow an error location down from `root`: the path as the user wrote it and what the
    schema allows there."""
    node: _Node | None = _Node(root)
    union: _Node | None = None  # the union whose member `node` is, when the last part was its tag
    path = ""
    for part in loc:
        is_tag, above = False, node
        if node is not None:
            node, is_tag = _step(node, part)
        union = above if is_tag else None
        if is_tag:
            continue
        path += f"[{part}]" if isinstance(part, int) else ("." if path else "") + str(part)
    path = path or "(top level)"
    if node is None:
        return Place(path)
    members = _members(node)
    if members is not None:
        disc = node.discriminator or "kind"
        return Place(path, kinds=tuple(t for m in members for t in _tags(m, disc)), discriminator=disc)
    if _is_model(node.tp):
        if union is not None:
            disc = union.discriminator or "kind"
            by_kind = {t: tuple(m.model_fields) for m in _members(union) for t in _tags(m, disc)}
            return Place(path, fields=tuple(node.tp.model_fields), discriminator=disc, fields_by_kind=by_kind)
        return Place(path, fields=tuple(node.tp.model_fields))
    return Place(path)


def describe_error(root: type[BaseModel], e: dict) -> str:
    """One line for one pydantic error: where, what, and the fix."""
    error_type = e["type"]
    place = locate(root, e["loc"])
    where, msg = place.path, e["msg"].removeprefix("Value error, ")
    fix = FIXES.get(error_type, "")
    if error_type == "extra_forbidden":
        key, parent = str(e["loc"][-1]), locate(root, e["loc"][:-1])
        close = difflib.get_close_matches(key, parent.fields, n=3)
        owners = [tag for tag, fields in parent.fields_by_kind.items() if key in fields]
        if close:
            fix = f"did you mean {', '.join(close)}? Otherwise remove it"
        elif owners:
            fix = f"{key} applies to {parent.discriminator} {', '.join(owners)} only; remove it or change the kind"
    elif error_type in ("model_attributes_type", "model_type") and place.kinds:
        fix = f"give a mapping with {place.discriminator}: one of {', '.join(place.kinds)}"
    elif error_type in ("union_tag_invalid", "union_tag_not_found"):
        kinds = ", ".join(place.kinds)
        where = f"{where}.{place.discriminator}"
        if error_type == "union_tag_not_found":
            msg, fix = "missing", f"add {place.discriminator}: one of {kinds}"
        else:
            got = str(e.get("ctx", {}).get("tag"))
            close = difflib.get_close_matches(got, place.kinds, n=1)
            msg = f"unknown {place.discriminator} {got!r}"
            fix = (f"did you mean {close[0]!r}? " if close else "") + f"{place.discriminator} is one of: {kinds}"
        return f"  - {where}: {msg}. Fix: {fix}"
    got = e.get("input")
    got_s = f" (got {got!r})" if not isinstance(got, (dict, list)) and error_type != "missing" else ""
    return f"  - {where}: {msg}{got_s}" + (f". Fix: {fix}" if fix else "")


def format_validation_error(path: str, err: ValidationError, root: type[BaseModel]) -> str:
    """The whole report for a file: one line per problem."""
    lines = [f"{path}: the campaign is not valid ({err.error_count()} problem(s)):"]
    lines += [describe_error(root, e) for e in err.errors()]
    return "\n".join(lines)
