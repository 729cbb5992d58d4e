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
