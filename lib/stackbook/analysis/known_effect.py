"""The known-effect control: an arm that replicates another with the harness's delay relay in front
(arm.known_delay) differs from it by exactly `tpot_ms` on every gap between token events. The rule
must find that difference, and its interval must hold the truth. This is the power half of a
defensible verdict, where the A/A control is the false-alarm half.

The truth, as a ratio of TPOT p50, follows from the undelayed arm's own repetitions: its median
TPOT t becomes t + tpot_ms, because adding the same cost to every request's gaps moves every
request's TPOT, and so their median, by that cost.
"""
from __future__ import annotations

import math

import pandas as pd

from stackbook.analysis.decision import AHEAD, COMPARED_BY_NAME, PairDecision

# The figures a known delay moves by a known amount: every gap between token events.
MOVED = ("tpot_p50", "itl_p50")


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
        held, missed = [], []
        for d in sorted(pair, key=lambda d: (d.metric, d.load)):
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
        if missed:
            lines.append(f"Known-effect control {arm} ({original} plus {added_ms:g} ms a token gap): found in "
                         f"{len(held)} of {len(pair)} comparison(s); missed: " + "; ".join(missed)
                         + ". Where the rule did not rank the known difference it lacks power on this host: "
                         "add repetitions or requests.")
        else:
            lines.append(f"Known-effect control {arm} ({original} plus {added_ms:g} ms a token gap): found in all "
                         f"{len(pair)} comparison(s), each interval holding the truth: " + "; ".join(held) + ".")
    return lines
