"""The prefix reuse a workload implies beside what each engine realized, per arm and point: the
hit rate an infinite prefix cache would reach on the trace's own prompts (block by block), the
engine's own hit counters where it exports them, and the cached prompt tokens its replies
reported. An engine that realizes less than the workload implies is a finding, said in words."""
from __future__ import annotations

import pandas as pd

# Realized within this many points of the implied rate counts as realized.
REALIZED_WITHIN = 0.05


def reuse_table(arms: dict) -> pd.DataFrame | None:
    """One row per arm and point of a workload that implies reuse; None where none does."""
    rows = []
    for name, a in arms.items():
        sweep = ((a.get("results") or {}).get("sweep")) or {}
        policy = (sweep.get("prefix_cache") or {}).get("policy")
        for point, s in (sweep.get("points") or {}).items():
            pc = s.get("prefix_cache") or {}
            implied = pc.get("implied_hit_rate")
            if implied is None:
                continue
            realized = max((pc[k] for k in ("engine_hit_rate", "reported_hit_rate") if pc.get(k) is not None),
                           default=None)
            rows.append({"arm": name, "point": point, "implied hit rate": implied,
                         "engine counters": pc.get("engine_hit_rate"), "replies reported": pc.get("reported_hit_rate"),
                         "finding": finding(implied, realized, policy)})
    return pd.DataFrame(rows).set_index(["arm", "point"]) if rows else None


def finding(implied: float, realized: float | None, policy: str | None = None) -> str:
    if realized is None:
        return "not observed: the engine reports neither hit counters nor cached tokens"
    gap = implied - realized
    if gap <= REALIZED_WITHIN:
        return f"realized: {realized:.0%} of prompt tokens from cache against {implied:.0%} implied"
    why = f"its cache: {policy}" if policy else "the engine's cache kept less of what the workload re-sent"
    return (f"not realized: {realized:.0%} from cache against {implied:.0%} implied, "
            f"{gap * 100:.0f} points short ({why})")


def depth_table(arms: dict) -> pd.DataFrame | None:
    """An agent trace's reuse at each session depth (0: the sessions it starts; 1: their subagents;
    ...): the trace's implied rate beside the cached tokens the replies at that depth reported. None
    where no point records depths (a trace without subagents, or any other workload)."""
    rows = []
    for name, a in arms.items():
        for point, s in ((((a.get("results") or {}).get("sweep")) or {}).get("points") or {}).items():
            for depth, x in ((s.get("prefix_cache") or {}).get("implied_by_depth") or {}).items():
                rows.append({"arm": name, "point": point, "depth": int(depth), "requests": x.get("requests"),
                             "implied hit rate": x.get("hit_rate"), "replies reported": x.get("reported_hit_rate")})
    return pd.DataFrame(rows).set_index(["arm", "point", "depth"]) if rows else None
