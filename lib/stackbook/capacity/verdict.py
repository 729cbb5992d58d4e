"""A probe's verdict on one load: inside the SLO, outside it, or undecided, with its reason.

The rule: a load is inside when the share of its requests meeting the SLO has a 95% Wilson lower
bound (measure.slo_bounds) at or above the target, outside when the upper bound is below it, and
undecided otherwise (more requests may decide it). Swapping the rule means supplying another
function returning a `ProbeVerdict`; the search reads only the verdict.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from stackbook.measure.slo_bounds import wilson_interval

Verdict = Literal["inside", "outside", "undecided"]


@dataclass(frozen=True)
class ProbeVerdict:
    """What one probe of one load concluded, and what it cost."""
    load: float
    verdict: Verdict
    reason: str
    requests: int
    duration_s: float = 0.0   # the probe's own duration: wall time for a real probe, model time for a simulated one
    met: int | None = None    # requests that met the SLO, where the rule counts them


def attainment_verdict(load: float, met: int, n: int, target: float, duration_s: float = 0.0,
                       confidence: float = 0.95) -> ProbeVerdict:
    """Inside / outside / undecided from `met` of `n` requests meeting the SLO against `target`."""
    if not 0 < target < 1:
        raise ValueError(f"target {target} must lie strictly between 0 and 1")
    lo, hi = wilson_interval(met, n, confidence)
    share = f"{met}/{n} met the SLO, {confidence:.0%} interval [{lo:.3f}, {hi:.3f}]"
    if lo >= target:
        verdict: Verdict = "inside"
        reason = f"{share}: at or above the target {target}"
    elif hi < target:
        verdict = "outside"
        reason = f"{share}: below the target {target}"
    else:
        verdict = "undecided"
        reason = f"{share}: holds the target {target}"
    return ProbeVerdict(load, verdict, reason, n, duration_s, met)
