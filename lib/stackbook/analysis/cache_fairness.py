"""The fairness check's prefix-cache column: the state each arm's cache realized, held against the
protocol and against the other arms, and the setting that would bring an arm that departs back.

A point is warm only by reuse of the workload's own content: the head every request shares by
construction (the chat template's opening, a fixed system prompt, the salt) is served from cache
by any server that caches prompts, whatever the protocol (measure.cache_split). Arms that all
depart from the protocol alike (the same share from cache, point by point) are comparable with
each other, and the table says so; an arm that departs alone, or unlike the arms that kept the
protocol, is kept out, with the setting that would make it comparable.
"""
from __future__ import annotations

from stackbook.loadgen.records import latest_attempt_only, read_records
from stackbook.measure.cache_split import COLD_WITHIN, construction_split, workload_reuse
from stackbook.measure.shared_prefix_reuse import implied_shared_prefix

# Two arms' shares of prompt tokens from cache, per point they both ran, alike within this.
MATCH_WITHIN = 0.05


def _records_by_point(a: dict) -> dict[str, list]:
    """The arm's raw records per point (latest attempts), for points recorded before the split."""
    path = getattr(a.get("dir"), "requests", None)
    out: dict[str, list] = {}
    for r in latest_attempt_only(read_records(path)) if path else []:
        out.setdefault(r.point, []).append(r)
    return out


def _split_of(point: str, pc: dict, records: dict) -> dict:
    """A point's split as recorded, or from its raw records where it was recorded without one."""
    if workload_reuse(pc) is not None or not records.get(point):
        return pc
    return construction_split(records[point], pc.get("salt_tokens", 0), pc.get("engine_hit_tokens"),
                              pc.get("engine_query_tokens"))


def shares_own_content(protocol) -> bool:
    """Whether the workload gives a cache content of its own to serve (shared prefixes, a
    conversation's history, a replayed log's sessions): what a warm cache is primed with."""
    w = protocol.workload
    return bool(getattr(w, "shared_prefix", None) or getattr(w, "conversation", None)
                or protocol.arrival.implied_reuse())


def realized_cache(a: dict, protocol) -> dict | None:
    """Per ranked point, the share of all prompt tokens from cache, the share of the workload's own
    beyond the shared head, and that head; then the arm's state. A point recorded before the split
    is split from its raw records; where neither tells the head apart, every cached token counts
    as reuse. None where the engine reports neither hit counters nor cached tokens."""
    points = ((a.get("results") or {}).get("sweep") or {}).get("points") or {}
    records: dict | None = None
    per_point = {}
    for name, s in points.items():
        pc = s.get("prefix_cache") or {}
        seen = [pc[k] for k in ("engine_hit_rate", "reported_hit_rate") if pc.get(k) is not None]
        if s.get("discarded") or not seen:
            continue
        if workload_reuse(pc) is None and max(seen) > 0 and records is None:
            records = _records_by_point(a)
        split = _split_of(name, pc, records or {})
        reuse = workload_reuse(split)
        per_point[name] = {"all": max(seen), "workload": max(seen) if reuse is None else reuse,
                           "head": split.get("shared_head_tokens") or 0}
    if not per_point:
        return None
    workload_max = max(p["workload"] for p in per_point.values())
    out = {"configured": protocol.prefix_cache, "realized": "warm" if workload_max > COLD_WITHIN else "cold",
           "hit_rate_max": max(p["all"] for p in per_point.values()), "workload_rate_max": workload_max,
           "head_tokens": max(p["head"] for p in per_point.values()), "points": len(per_point),
           "per_point": per_point, "primes_own_content": shares_own_content(protocol)}
    implied = protocol.arrival.implied_reuse()
    if implied and implied["hit_rate"] > 0:  # the workload's own prompts re-send prefixes (a log's sessions)
        out["implied_hit_rate"] = implied["hit_rate"]
    elif (rate := shared_prefix_implied(a, protocol, points)) is not None:
        out["implied_hit_rate"] = rate
    return out


def shared_prefix_implied(a: dict, protocol, points: dict) -> float | None:
    """Under a cold protocol, a shared-prefix workload's points each start empty and re-send their
    groups' prefixes: the highest rate one infinite cache would reach on a ranked point (none for
    a warm protocol, whose priming is the reuse, or a workload without shared prefixes)."""
    prefix = getattr(protocol.workload, "shared_prefix", None)
    if prefix is None or protocol.prefix_cache != "cold":
        return None
    records = _records_by_point(a)
    rates = [implied_shared_prefix(records.get(name, []), prefix.tokens) for name, s in points.items()
             if not s.get("discarded")]
    return max((r for r in rates if r), default=None)


def same_realized_cache(a: dict, b: dict) -> bool:
    """Alike where both realized the same state with, on every point both ran, the same shares from
    cache (all prompt tokens and the workload's own) within MATCH_WITHIN; where the workload itself
    re-sends prefixes, how much of that an engine reuses is what is measured, not a difference."""
    if a.get("implied_hit_rate") and b.get("implied_hit_rate"):
        return True
    if a["realized"] != b["realized"]:
        return False
    pa, pb = a.get("per_point") or {}, b.get("per_point") or {}
    return all(abs(pa[p][k] - pb[p][k]) <= MATCH_WITHIN for p in set(pa) & set(pb) for k in ("all", "workload"))


def cache_as_configured(v: dict, protocol=None) -> bool:
    """A cold protocol is kept where nothing beyond the shared head came from cache; a warm one
    where the workload's own content was served from it, or where the workload has none to share
    (then the head is all a primed cache holds). Where the workload's own prompts re-send
    prefixes (a replayed log: the cache starts cold at each point and its sessions fill it), any
    realized state keeps the protocol: the realized rate beside the implied one is the finding."""
    if v.get("implied_hit_rate"):
        return True
    if v["configured"] == "warm" and not v.get("primes_own_content", True):
        return True
    return v["realized"] == v["configured"]


def cache_remedy(v: dict, protocol) -> str:
    """The setting that would make an arm whose cache departed from the protocol comparable."""
    if v["configured"] == "cold" and not protocol.cache_salt:
        return ("set protocol.cache_salt: true (each arm's points then open with their own salt, so no request is "
                "served what another arm or point sent, apart from the template's head)")
    if v["configured"] == "cold":
        return ("set protocol.prefix_cache: warm (the workload's own prompts share content "
                "a cache serves within a point)")
    return "set protocol.prefix_cache: cold, or turn the engine's prefix cache on"


def cache_cell(v: dict) -> str:
    """The cell as a reader sees it: the state against the configured one and the share of prompt
    tokens from cache; where a head was served to every request, the share of the workload's own
    beside it, which alone decides the state."""
    implied = f"; the workload's own prompts imply {v['implied_hit_rate']:.0%}" if v.get("implied_hit_rate") else ""
    share = f"at most {v['hit_rate_max']:.0%} of prompt tokens from cache"
    over = f"over {v['points']} point(s){implied}"
    head = v.get("head_tokens") or 0
    if not head:
        return f"{v['realized']} (configured {v['configured']}): {share}, {over}"
    if v["realized"] == "cold":
        return (f"cold apart from the {head}-token template head every request shares (configured {v['configured']}): "
                f"{share} ({v['workload_rate_max']:.0%} of the workload's own), {over}")
    return (f"warm (configured {v['configured']}): {share} ({v['workload_rate_max']:.0%} of the workload's own, "
            f"beyond the template's tokens), {over}")


def alike_note(arms: int, configured: str) -> str:
    """Said in the cell of an arm that departs from the protocol alike with the others."""
    return (f"; departs from the protocol alike in {arms} arms: comparable with each other, "
            f"not with a {configured} cache")
