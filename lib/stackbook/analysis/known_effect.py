"""The known-effect control: an arm that replicates another with the harness's delay relay in front
(arm.known_delay) differs from it by exactly `tpot_ms` on every gap between token events. The rule
must find that difference, and its interval must hold the truth. This is the power half of a
defensible verdict, where the A/A control is the false-alarm half.

The truth, as a ratio of TPOT p50, follows from the undelayed arm's own repetitions: its median
TPOT t becomes t + tpot_ms, because adding the same cost to every request's gaps moves every
request's TPOT, and so their median, by that cost. That holds where the delay leaves the engine's
own work unchanged: one stream at a time (a closed loop at concurrency 1), or an open loop, whose
arrivals do not wait on replies. In a closed loop at concurrency 2 and above each reply ends later,
so the next request starts later and the engine serves fewer streams at once: its own TPOT falls
and the arm's grows by less than the delay (seen: +4 to +10 ms for a 12 ms delay at concurrency 2).
There the truth is not known, and the line says so instead of judging the interval.
"""
from __future__ import annotations

import math

import pandas as pd

from stackbook.analysis.decision import AHEAD, COMPARED_BY_NAME, PairDecision
from stackbook.measure.metric_definitions import figure

# The figures a known delay moves by a known amount: every gap between token events.
MOVED = tuple(figure(m, "p50").name for m in ("tpot_ms", "itl_ms"))


def true_ratio(baseline: list[float], added_ms: float, delayed_is_a: bool) -> float:
    """The ratio a/b the delay makes, from the undelayed arm's per-repetition figures (geometric
    mean over repetitions, as the paired interval estimates it)."""
    logs = [math.log((t + added_ms) / t) for t in baseline if t and t > 0]
    r = math.exp(sum(logs) / len(logs))
    return r if delayed_is_a else 1 / r


def known_effect_lines(df: pd.DataFrame, found: list[PairDecision], delayed: dict[str, tuple[str, float]],
                       unit: str) -> list[str]:
    """For each known-effect arm (its name -> (the arm it replicates, tpot_ms)): per load and moved
    figure, whether the rule ranked the undelayed arm ahead and whether the interval holds the truth."""
    lines = []
    for arm, (original, added_ms) in delayed.items():
        pair = [d for d in found if {d.arm_a, d.arm_b} == {arm, original} and d.metric in MOVED]
        if not pair:
            lines.append(f"Known-effect control {arm} ({original} plus {added_ms:g} ms a token gap): not compared "
                         "(no ranked points in common).")
            continue
        known = [d for d in pair if truth_known(d.load, unit)]
        unknown = sorted({d.load for d in pair} - {d.load for d in known})
        held, missed = [], []
        for d in sorted(known, key=lambda d: (d.metric, d.load)):
            column = COMPARED_BY_NAME[d.metric].column
            base = df[(df["arm"] == original) & (df["load"] == d.load)][column].dropna().tolist()
            truth = true_ratio(base, added_ms, d.arm_a == arm) if base else None
            inside = truth is not None and d.lo is not None and d.lo <= truth <= d.hi
            found_it = d.decision == AHEAD and d.leader == original
            where = (f"{unit} {d.load:g}, {COMPARED_BY_NAME[d.metric].label}: {d.decision}"
                     + (f" ({d.leader} ahead)" if d.leader else "")
                     + (f", ratio {d.arm_a}/{d.arm_b} [{d.lo:.3f}, {d.hi:.3f}] against the true {truth:.3f}"
                        if truth is not None and d.lo is not None else ""))
            (held if found_it and inside else missed).append(where + ("" if inside else " (truth outside)"))
        head = f"Known-effect control {arm} ({original} plus {added_ms:g} ms a token gap): "
        tail = (f" At {unit} {', '.join(f'{x:g}' for x in unknown)} the delay also thins the engine's batch (each "
                "reply ends later, so the next request starts later): the true ratio is not known there and is not "
                "judged." if unknown else "")
        if not known:
            lines.append(head + "no comparison at a load where the truth is known (concurrency 1, or an open loop)."
                         + tail)
        elif missed:
            lines.append(head + f"found in {len(held)} of {len(known)} comparison(s) where the truth is known; missed: "
                         + "; ".join(missed) + ". Where the rule did not rank the known difference it lacks power on "
                         "this host: add repetitions or requests." + tail)
        else:
            lines.append(head + f"found in all {len(known)} comparison(s) where the truth is known, each interval "
                         "holding the truth: " + "; ".join(held) + "." + tail)
    return lines


def truth_known(load: float, unit: str) -> bool:
    """Whether the delay leaves the engine's own work unchanged at this load: an open loop, or
    one client at a time."""
    return unit != "concurrency" or load <= 1
