"""A probe on the simulated knee scheduler: the load is a closed-loop concurrency, the verdict
the attainment rule on the measured requests, the duration the model's own seconds.

It lets the search be run thousands of times against a capacity known beforehand
(`harness.knee_truth`), with no server and no clock: every probe is a seeded simulation.
"""
from __future__ import annotations

from dataclasses import dataclass

from stackbook.capacity.verdict import ProbeVerdict, attainment_verdict
from stackbook.harness.knee_scheduler import Knee, Lengths, SloBounds, simulate_closed_loop


@dataclass
class KneeProbe:
    """Each call simulates `requests` measured requests at concurrency `load`, plus one warm-up
    and one cool-down request per client, with a seed of its own drawn from `seed` and the call's
    number, so a search's probes are independent yet the whole search is reproducible."""
    knee: Knee
    slo: SloBounds
    target: float
    lengths: Lengths
    seed: int = 0
    calls: int = 0

    def __call__(self, load: float, requests: int) -> ProbeVerdict:
        c = int(load)
        if c != load or c < 1:
            raise ValueError(f"a closed-loop concurrency is a whole number of at least 1, not {load}")
        self.calls += 1
        run = simulate_closed_loop(self.knee, c, requests + 2 * c, self.lengths, self.seed * 1_000_003 + self.calls)
        measured = run.measured(c, c)
        met = sum(self.slo.met(t) for t in measured)
        return attainment_verdict(load, met, len(measured), self.target, duration_s=run.duration_s)
