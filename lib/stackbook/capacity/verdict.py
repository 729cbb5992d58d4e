"""A probe's verdict on one load: inside the SLO, outside it, or undecided, with its reason.

The rule is deliberately simple and self-contained, so the search can be tested before the
percentile bounds are wired in: a load is inside when the share of its requests meeting the SLO
has a 95% Wilson lower bound at or above the target, outside when the upper bound is below it,
and undecided otherwise (more requests may decide it). Swapping the rule means supplying another
function returning a `ProbeVerdict`; the search reads only the verdict.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Verdict = Literal["inside", "outside", "undecided"]
Z95 = 1.959963984540054  # two-sided 95%


@dataclass(frozen=True)
class ProbeVerdict:
    """What one probe of one load concluded, and what it cost."""
    load: float
    verdict: Verdict
    reason: str
    requests: int
    duration_s: float = 0.0   # the probe's own duration: wall time for a real probe, model time for a simulated one
    met: int | None = None    # requests that met the SLO, where the rule counts them


def wilson_interval(met: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial share; (0, 1) when there are no requests."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= met <= n:
        raise ValueError(f"met {met} must lie between 0 and n {n}")
    p = met / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def attainment_verdict(load: float, met: int, n: int, target: float, duration_s: float = 0.0,
                       z: float = Z95) -> ProbeVerdict:
    """Inside / outside / undecided from `met` of `n` requests meeting the SLO against `target`."""
    if not 0 < target < 1:
        raise ValueError(f"target {target} must lie strictly between 0 and 1")
    lo, hi = wilson_interval(met, n, z)
    share = f"{met}/{n} met the SLO, 95% interval [{lo:.3f}, {hi:.3f}]"
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
