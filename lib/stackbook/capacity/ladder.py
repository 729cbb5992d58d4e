"""A fixed ladder at the search's resolution, the comparison the search is judged against.

Sweeps probe a preset list of loads; at the same resolution as the search (rungs one tolerance
apart from the start to the largest load) the ladder brackets the capacity as well, so the
difference between the two is what the search saves in probes and time. Each rung is decided
exactly as the search decides a load (same re-probes, same budgets).
"""
from __future__ import annotations

from stackbook.capacity.probing import CapacityInterval, Probe, SearchPlan, Session


def ladder_loads(plan: SearchPlan) -> list[float]:
    """Rungs from the start to the largest load: `tolerance` apart for integer loads, a factor
    1 + tolerance apart for rates."""
    loads, load = [], plan.round(plan.start)
    while load <= plan.max_load + 1e-9:
        loads.append(load)
        load = load + plan.tolerance if plan.integer else load * (1 + plan.tolerance)
    return loads


def run_ladder(probe: Probe, plan: SearchPlan, stop_at_first_outside: bool = False) -> CapacityInterval:
    """Every rung in ascending order (or up to the first proven outside); the interval is the
    highest inside rung below the lowest outside one."""
    session = Session(probe, plan)
    verdicts: dict[float, str] = {}
    reason = "every rung probed"
    for load in ladder_loads(plan):
        v = session.decide(load)
        if v is None:
            reason = session.stop_reason or "budget spent"
            break
        verdicts[load] = v.verdict
        if stop_at_first_outside and v.verdict == "outside":
            reason = f"stopped at the first rung outside, {load:g}"
            break
    outside = [load for load, v in verdicts.items() if v == "outside"]
    upper = min(outside) if outside else None
    inside = [load for load, v in verdicts.items() if v == "inside" and (upper is None or load < upper)]
    lower = max(inside) if inside else None
    grey = tuple(load for load, v in verdicts.items() if v == "undecided"
                 and (lower is None or load > lower) and (upper is None or load < upper))
    return CapacityInterval(lower, upper, plan.resolved(lower, upper), reason, tuple(session.history), grey)
