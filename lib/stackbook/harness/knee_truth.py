"""The true capacity of the knee scheduler under an SLO: what a capacity search is judged against.

Capacity here is the highest closed-loop concurrency whose steady-state SLO attainment (the share
of requests within every bound) is at least the target; with one bound and target q that is the
highest concurrency whose q-quantile is within the bound. Below the knee every request's TTFT is
`prefill_steps` steps and its TPOT one step at b = concurrency, so attainment is exactly 1 or 0;
past the knee TPOT stays at one step for B and TTFT grows with the queue, whose quantiles have no
short closed form, so they are read from one long seeded simulation per concurrency (attainment
falls as the queue grows, so the scan stops after a few loads below the target).
"""
from __future__ import annotations

from dataclasses import dataclass

from stackbook.harness.knee_scheduler import Knee, Lengths, SloBounds, simulate_closed_loop


@dataclass(frozen=True)
class Truth:
    """The capacity, with the attainment of every concurrency examined, so a reader sees how far
    from the target the loads on either side of it are."""
    capacity: int                   # 0: not even one request at a time meets the SLO
    target: float
    attainment: dict[int, float]
    requests: int                   # simulated per concurrency past the knee

    def margin(self) -> tuple[float | None, float | None]:
        """Attainment at the capacity and one above it: how hard each side is to prove."""
        return self.attainment.get(self.capacity), self.attainment.get(self.capacity + 1)


def attainment_below_knee(knee: Knee, slo: SloBounds, concurrency: int) -> float:
    """Exact: every step holds `concurrency` sequences, so every request has the same timings."""
    step = knee.step_s(concurrency)
    ttft_ok = slo.ttft_s is None or knee.prefill_steps * step <= slo.ttft_s
    tpot_ok = slo.tpot_s is None or step <= slo.tpot_s
    return 1.0 if ttft_ok and tpot_ok else 0.0


def simulated_attainment(knee: Knee, slo: SloBounds, concurrency: int, lengths: Lengths, requests: int,
                         seed: int) -> float:
    """One long closed loop; the first and last two requests per client are left out."""
    warm = 2 * concurrency
    run = simulate_closed_loop(knee, concurrency, requests + 2 * warm, lengths, seed)
    measured = run.measured(warm, warm)
    return sum(slo.met(t) for t in measured) / len(measured)


def attainment(knee: Knee, slo: SloBounds, concurrency: int, lengths: Lengths, requests: int = 20_000,
               seed: int = 7) -> float:
    if concurrency <= knee.max_batch:
        return attainment_below_knee(knee, slo, concurrency)
    return simulated_attainment(knee, slo, concurrency, lengths, requests, seed)


def true_capacity(knee: Knee, slo: SloBounds, target: float, lengths: Lengths, requests: int = 20_000,
                  seed: int = 7, confirm: int = 3, max_concurrency: int = 4096) -> Truth:
    """The highest concurrency before the first one whose attainment is under `target`; the scan
    goes `confirm` loads further to show the failure holds."""
    seen: dict[int, float] = {}
    capacity, failed_at = 0, None
    for c in range(1, max_concurrency + 1):
        seen[c] = attainment(knee, slo, c, lengths, requests, seed)
        if failed_at is None:
            if seen[c] >= target:
                capacity = c
            else:
                failed_at = c
        if failed_at is not None and c >= failed_at + confirm - 1:
            break
    else:
        raise ValueError(f"attainment stays at or above {target} up to concurrency {max_concurrency}: "
                         "the SLO never binds (raise a bound's strictness or max_concurrency)")
    return Truth(capacity, target, seen, requests)
