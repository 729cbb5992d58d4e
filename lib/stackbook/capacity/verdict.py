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


def requests_to_prove(target: float, confidence: float = 0.95, most: int = 1_000_000) -> int:
    """The fewest requests that can prove `target` under this rule: all of them meeting the SLO
    puts the Wilson lower bound at or above it (None of fewer can be judged inside)."""
    n = 1
    while wilson_interval(n, n, confidence)[0] < target:
        n = n * 2 if n < 64 else int(n * 1.25)
        if n > most:
            raise ValueError(f"no sample of at most {most} requests can prove {target}")
    lo = n // 2 if n <= 128 else int(n / 1.25)
    while lo + 1 < n:  # the smallest n in (lo, n] that proves it
        mid = (lo + n) // 2
        if wilson_interval(mid, mid, confidence)[0] >= target:
            n = mid
        else:
            lo = mid
    return n
