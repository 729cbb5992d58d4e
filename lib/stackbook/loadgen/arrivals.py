"""Arrival schedules as absolute offsets from the start of a point (seconds).

Each request is sent at its own deadline, computed up front from the seed: a slow send never
pushes the following ones later (no accumulated drift), and the lag between deadline and actual
send is recorded for every request.
"""
from __future__ import annotations

import random


def constant_schedule(rate: float, n: int) -> list[float]:
    return [i / rate for i in range(n)]


def poisson_schedule(rate: float, n: int, seed: int) -> list[float]:
    """Exponential inter-arrival times: coefficient of variation 1."""
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        out.append(t)
        t += rng.expovariate(rate)
    return out


def gamma_schedule(rate: float, n: int, burstiness: float, seed: int) -> list[float]:
    """Gamma inter-arrival times with mean 1/rate and squared coefficient of variation
    `burstiness` (1 = Poisson, above 1 burstier, below 1 more regular)."""
    if burstiness <= 0:
        raise ValueError("burstiness must be positive (1 is Poisson)")
    shape = 1.0 / burstiness
    scale = 1.0 / (rate * shape)
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        out.append(t)
        t += rng.gammavariate(shape, scale)
    return out
