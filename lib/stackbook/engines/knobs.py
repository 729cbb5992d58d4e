"""A knob: one setting of a kind that the search may change, the layer of the stack it acts on,
and the values worth trying.

Each kind declares its own knobs (an engine adapter's `search_knobs`, the knee server's in
`search.knee`), so the loop never needs to know a kind by name. An A/A knob (`control`) changes
nothing the system does: measuring it against the incumbent is the loop's check that the accept
rule does not accept noise.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Layer = Literal["runtime", "kernels", "host execution", "orchestration"]
Value = int | float | str | bool


class Knob(BaseModel):
    """One setting: its name as the kind's configuration spells it, its layer, its candidate
    values (the default first among them) and what it changes, in words."""
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    layer: Layer
    values: tuple[Value, ...] = Field(min_length=2, description="the candidates, the default among them")
    default: Value
    control: bool = Field(False, description="an A/A knob: every value runs the same system")
    what: str = ""

    @model_validator(mode="after")
    def _default_is_a_candidate(self) -> "Knob":
        if self.default not in self.values:
            raise ValueError(
                f"knob {self.name}: its default {self.default!r} is not among its values {list(self.values)}"
            )
        if len(set(map(repr, self.values))) != len(self.values):
            raise ValueError(f"knob {self.name}: its values {list(self.values)} repeat one")
        return self


def by_name(knobs: tuple[Knob, ...]) -> dict[str, Knob]:
    """The knobs keyed by name; two knobs of one kind may not share a name."""
    out: dict[str, Knob] = {}
    for k in knobs:
        if k.name in out:
            raise ValueError(f"two knobs named {k.name}")
        out[k.name] = k
    return out


def defaults(knobs: tuple[Knob, ...]) -> dict[str, Value]:
    return {k.name: k.default for k in knobs}


def grid_size(knobs: tuple[Knob, ...]) -> int:
    """Configurations a full grid over these knobs measures (A/A knobs left out: they change nothing)."""
    n = 1
    for k in knobs:
        if not k.control:
            n *= len(k.values)
    return n
