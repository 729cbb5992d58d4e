"""The fairness check, built from what each arm actually did, not from the protocol it shared.

Per arm it reads: the weights the engine loaded (engine.json's model identity), the KV precision
the engine reported (configured where it logs none), the decoding fields the request bodies
carried, the digest of the prompts sent per point, the realized output lengths (server usage
counts), the realized arrival (achieved rate, or mean requests in flight), the executed
warm-up, window and cool-down, and the prefix cache's reuse beyond the head every request shares
(analysis.cache_fairness). A field no arm observed, or that one arm did not observe, is
"not observed", never a difference; a field the campaign declares as its variable under test
may differ.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Callable

import pandas as pd

from stackbook.analysis.cache_fairness import (
    alike_note,
    cache_as_configured,
    cache_cell,
    cache_remedy,
    realized_cache,
    same_realized_cache,
)
from stackbook.measure.validity import CONCURRENCY_TOLERANCE, RATE_TOLERANCE

NOT_OBSERVED = "not observed"
DIFFERS = "differs"  # the column of the fields an arm departs in, from the protocol or from the other arms
REMEDY = "remedy"  # the column of the settings that would make an arm that departs comparable
# Realized output lengths agree within 2% per point: an engine's length control may be off by a
# token on a long reply; anything more is a different workload.
LENGTH_TOLERANCE = 0.02


def _equal(a, b) -> bool:
    return a == b


def _within(tolerance: float) -> Callable[[Any, Any], bool]:
    """Per point (on the points both arms ran), values within a relative tolerance."""
    def same(a: dict, b: dict) -> bool:
        for point in set(a) & set(b):
            x, y = a[point], b[point]
            if x is None or y is None:
                continue
            if abs(x - y) > tolerance * max(abs(x), abs(y)):
                return False
        return True
    return same


def _same_points_within(tolerance: float) -> Callable[[Any, Any], bool]:
    """The same points, each within a relative tolerance (the realized load)."""
    inner = _within(tolerance)
    return lambda a, b: set(a) == set(b) and inner(a, b)


def _equal_on_common_points(a: dict, b: dict) -> bool:
    return all(a[p] == b[p] for p in set(a) & set(b))


@dataclass(frozen=True)
class Field:
    """One column of the fairness table: where its value comes from, how two are compared, and
    which declared variables under test (protocol paths) may make it differ. A field the protocol
    fixes outright (the prefix-cache state) is held against the protocol (`keeps_protocol`), not
    against another arm; so are the decoding the bodies carried and the requests each point sent
    as warm-up and measured, which the protocol fixes too. Where `alike_suffices`, arms that all
    depart from the protocol alike (no arm keeping it) are comparable with each other; `remedy`
    names the setting that would make an arm that departs comparable."""
    name: str
    observe: Callable[[dict, Any], Any]  # (arm data, the arm's protocol) -> value, or None
    same: Callable[[Any, Any], bool]
    declared_by: tuple[str, ...]
    keeps_protocol: Callable[[Any, Any], bool] | None = None  # (value, the arm's protocol) -> kept
    alike_suffices: bool = False
    remedy: Callable[[Any, Any], str] | None = None  # (value, the arm's protocol) -> the setting to change


def _points(a: dict) -> dict:
    return ((a.get("results") or {}).get("sweep") or {}).get("points") or {}


def _per_point(a: dict, key: str, ranked_only: bool = False) -> dict | None:
    """Per point, one observed value. With ranked_only, points a preregistered rule discarded are
    left out: they never rank, so what the engine did there cannot make the arm unfair."""
    vals = {p: s.get(key) for p, s in _points(a).items()
            if s.get(key) not in (None, [], {}) and not (ranked_only and s.get("discarded"))}
    return vals or None


def weights(a: dict, protocol) -> dict | None:
    """The digests of the weights the engine was given (both formats of the same checkpoint are
    recorded, since engines load different ones), and the checkpoint they derive from."""
    model = (a.get("engine") or {}).get("model") or {}
    out = {k: model.get(k) for k in ("hf_weights_sha256", "gguf_sha256") if model.get(k)}
    source = (model.get("source_artifact") or {}).get("sha256")
    if source:
        out["source_sha256"] = source
    return out or None


def precision(a: dict, protocol) -> dict | None:
    """Weights and state precision as configured; the KV precision the engine reported where its
    log states it, else as configured."""
    engine = a.get("engine") or {}
    if not engine:
        return None
    realized = engine.get("realized_capacity") or {}
    p = protocol.precision
    return {"weights": p.weights, "kv_cache": realized.get("kv_type") or p.kv_cache, "state": p.state}


def kv_precision_source(a: dict, protocol) -> str | None:
    engine = a.get("engine") or {}
    if not engine:
        return None
    return "engine log" if (engine.get("realized_capacity") or {}).get("kv_type") else "configured"


def decoding(a: dict, protocol) -> list | None:
    """The distinct sampling settings the bodies carried, over every point."""
    seen = {json.dumps(d, sort_keys=True) for s in _points(a).values() for d in s.get("decoding_sent") or []}
    return [json.loads(d) for d in sorted(seen)] or None


def prompts(a: dict, protocol) -> dict | None:
    return _per_point(a, "prompts_sha256")


def output_lengths(a: dict, protocol) -> dict | None:
    return _per_point(a, "output_tokens_server_mean", ranked_only=True)


def arrival(a: dict, protocol) -> dict | None:
    """Per point, the load delivered as the arrival pattern holds it (its `delivered_load`: a
    schedule's achieved send rate, a closed loop's mean in flight, a session replay's steps); a
    discarded point's load (often the very reason it was discarded) is not compared."""
    out = {}
    for p, s in _points(a).items():
        if s.get("discarded"):
            out[p] = None  # the point was run (its name counts), its load is not compared
            continue
        v = protocol.arrival.delivered_load(s)
        if v is not None:
            out[p] = v
    return out if any(v is not None for v in out.values()) else None


def window(a: dict, protocol) -> dict | None:
    """Per point, requests sent as warm-up, measured and cool-down."""
    return _per_point(a, "phases_sent")


def _decoding_as_configured(v: list, protocol) -> bool:
    """Every body carried the protocol's decoding (as sent: neutral and, when greedy, unused
    fields left out, so an endpoint that cannot take them still decodes the same way)."""
    from stackbook.loadgen.sent import decoding_sent

    return all(decoding_sent(d) == decoding_sent(protocol.decoding.resolved())
               for d in v)  # older records kept every field


def _window_as_configured(v: dict, protocol) -> bool:
    """Every point sent the protocol's warm-up and measured requests (a replayed trace sends its
    own count, so its measured requests are not held; a conversation sends each turn)."""
    turns = protocol.workload.turns()
    for phases in v.values():
        if phases.get("warmup", 0) != protocol.warmup_requests * turns:
            return False
        if protocol.arrival.kind != "trace" and phases.get("measure", 0) != protocol.requests_per_point * turns:
            return False
    return True


def canary_suite(a: dict, protocol) -> str | None:
    """The canary suite that gated the arm, by name and content digest."""
    c = (a.get("results") or {}).get("canaries") or {}
    return f"{c['suite']} ({c['suite_sha256'][:12]})" if c.get("suite") and c.get("suite_sha256") else None


def harness(a: dict, protocol) -> str | None:
    """The harness revision that measured the arm, as its passport records it."""
    value = ((a.get("passport") or {}).get("protocol") or {}).get("harness")
    return value if value and value != "not recorded" else None


def chat_template(a: dict, protocol) -> str | None:
    return ((a.get("engine") or {}).get("identity") or {}).get("chat_template_sha256")


# Realized per run (the load delivered, the lengths generated): compared within a run with a
# tolerance; across runs on different hosts they are what is being compared, not held fixed.
MEASURED_FIELDS = ("arrival", "output_lengths")


def protocol_digest(protocol) -> str:
    """The arm's protocol as configured (its declared overrides applied), as one digest: shown, and
    compared across runs; within a run an override is always a declared variable."""
    text = json.dumps(protocol.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def decoding_not_sent(a: dict) -> str:
    """The protocol's decoding fields this arm's endpoint cannot take (engine.json), shown beside
    the decoding actually sent; the comparison itself reads the bodies."""
    fields = (a.get("engine") or {}).get("decoding_fields")
    if not fields:
        return "not recorded"
    return ", ".join(sorted(fields.get("not_sent") or {})) or "none"


RATE_OR_INFLIGHT = max(RATE_TOLERANCE, CONCURRENCY_TOLERANCE)

FIELDS = (
    Field("model", weights, _equal, ("model",)),
    Field("precision", precision, _equal, ("precision",)),
    Field("decoding", decoding, _equal, ("decoding",), _decoding_as_configured),
    Field("prompts", prompts, _equal_on_common_points, ("workload", "seeds")),
    Field("output_lengths", output_lengths, _within(LENGTH_TOLERANCE), ("workload",)),
    Field("arrival", arrival, _same_points_within(RATE_OR_INFLIGHT), ("arrival",)),
    Field("window", window, _equal_on_common_points, ("requests_per_point", "warmup_requests", "arrival"),
          _window_as_configured),
    # warm only by reuse of the workload's own content beyond the head every request shares
    Field("prefix_cache", realized_cache, same_realized_cache, ("prefix_cache",), cache_as_configured,
          alike_suffices=True, remedy=cache_remedy),
    Field("chat_template", chat_template, _equal, ("model", "chat_template")),
    Field("canary_suite", canary_suite, _equal, ("canaries",)),
    Field("harness", harness, _equal, ("harness",)),
)


def declared_fields(declared: list[str]) -> set[str]:
    """The fairness columns the campaign's variables under test may make differ."""
    out = set()
    for v in declared:
        head = v.split(".")[0]
        out |= {f.name for f in FIELDS if head in f.declared_by or v == f.name}
    return out


def _short(field: str, value) -> str:
    """A cell as a reader sees it: the prompt digests per point shortened to one digest of them all."""
    if value is None:
        return NOT_OBSERVED
    if isinstance(value, str):
        return value
    if field == "prefix_cache":
        return cache_cell(value)
    if field == "prompts":
        joined = hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()
        return f"{len(value)} point(s), sha256 {joined[:16]}"
    if isinstance(value, dict) and all(isinstance(v, float) for v in value.values()):
        value = {k: round(v, 3) for k, v in value.items()}
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def majority(values: list, same: Callable[[Any, Any], bool]):
    """The value most arms observed, or None where no group of alike values outnumbers the others
    (two arms that disagree: neither is the reference, both differ)."""
    groups: list[list] = []
    for v in values:
        for g in groups:
            if same(v, g[0]):
                g.append(v)
                break
        else:
            groups.append([v])
    sizes = sorted((len(g) for g in groups), reverse=True)
    if not groups or (len(sizes) > 1 and sizes[0] == sizes[1]):
        return None
    return max(groups, key=len)[0]


def _alike_departing(f: Field, value, seen: list, reference, protocol) -> int:
    """How many arms depart from the protocol alike with this one, where that makes them comparable
    with each other: no arm kept the protocol, and this one's value is the one most arms share, by
    two arms or more. 0 otherwise."""
    if not f.alike_suffices or reference is None or any(f.keeps_protocol(v, protocol) for v in seen):
        return 0
    alike = sum(1 for v in seen if f.same(v, reference))
    return alike if alike >= 2 and f.same(value, reference) else 0


def _differs(f: Field, value, seen: list, reference, protocol) -> bool:
    if value is None:
        return False
    if f.keeps_protocol is not None:
        return not f.keeps_protocol(value, protocol) and not _alike_departing(f, value, seen, reference, protocol)
    if reference is None:  # no majority: any arm whose value another arm does not share differs
        return any(not f.same(value, v) for v in seen)
    return not f.same(value, reference)


def fairness_table(campaign, arms: dict) -> pd.DataFrame:
    """One row per arm, one column per thing that must be identical, as observed; then the fields
    in which the arm departs (from the protocol where it fixes the value, else from what most
    arms observed, or, with no majority, from any other arm) and whether it is comparable. No arm
    is the reference by its place in the campaign."""
    if not arms:
        return pd.DataFrame()
    observed: dict[str, dict[str, Any]] = {}
    for name, a in arms.items():
        protocol = campaign.protocol_for(a["arm"])
        observed[name] = {f.name: f.observe(a, protocol) for f in FIELDS}
        observed[name]["kv_precision_from"] = kv_precision_source(a, protocol)
        observed[name]["decoding_not_sent"] = decoding_not_sent(a)
        observed[name]["protocol_sha256"] = protocol_digest(protocol)
    allowed = declared_fields(list(campaign.variables_under_test))
    seen = {f.name: [o[f.name] for o in observed.values() if o[f.name] is not None] for f in FIELDS}
    reference = {f.name: majority(seen[f.name], f.same) for f in FIELDS}
    rows = []
    for name, o in observed.items():
        protocol = campaign.protocol_for(arms[name]["arm"])
        differing = [f for f in FIELDS if f.name not in allowed
                     and _differs(f, o[f.name], seen[f.name], reference[f.name], protocol)]
        cells = {k: _short(k, v) for k, v in o.items()}
        for f in FIELDS:
            if o[f.name] is not None and f.keeps_protocol and not f.keeps_protocol(o[f.name], protocol):
                if n := _alike_departing(f, o[f.name], seen[f.name], reference[f.name], protocol):
                    cells[f.name] += alike_note(n, str(o[f.name].get("configured")))
        rows.append({"arm": name, **cells, DIFFERS: ", ".join(f.name for f in differing),
                     REMEDY: "; ".join(f.remedy(o[f.name], protocol) for f in differing if f.remedy)})
    df = pd.DataFrame(rows).set_index("arm")
    df["comparable"] = [not d for d in df[DIFFERS]]
    return df


def remedy_words(fairness: pd.DataFrame, arms: list[str]) -> str:
    """The settings that would make the arms kept out comparable, as a sentence to follow the
    verdict's line naming them ("" where no setting would)."""
    if fairness.empty or REMEDY not in fairness:
        return ""
    said = dict.fromkeys(r for a in arms if a in fairness.index for r in str(fairness.loc[a, REMEDY]).split("; ") if r)
    return f" To make them comparable: {'; '.join(said)}." if said else ""
