"""Verdicts of the load-generator fidelity benchmark (benchmarks/fidelity.py): pure functions
over its measurements, so the rules that turn figures into pass/fail are tested on their own."""
from __future__ import annotations

from stackbook.measure.validity import MAX_SCHEDULE_LAG_MS

AGREEMENT = 0.05        # medians and histogram means must agree within 5%
RATE_ADVANTAGE = 2.0    # stackbook must hold at least twice the peer's rate


def server_lag_ms(arrivals: list[float], rate: float) -> list[float]:
    """Lag of each arrival (server clock, seconds) behind a constant schedule of `rate`, aligned on
    the start that makes the earliest-relative arrival exactly on time."""
    a = sorted(arrivals)
    offsets = [t - i / rate for i, t in enumerate(a)]
    origin = min(offsets)
    return [(o - origin) * 1000 for o in offsets]


def highest_rate_held(ladder: list[dict], lag_key: str, errors_key: str,
                      max_lag_ms: float = MAX_SCHEDULE_LAG_MS) -> float:
    """The highest rate of an increasing ladder held at every rung up to it: p99 lag within the
    bound and no failed request. A rung passed after a failed one does not count."""
    held = 0.0
    for row in sorted(ladder, key=lambda r: r["rate_rps"]):
        if row[lag_key] <= max_lag_ms and not row[errors_key]:
            held = row["rate_rps"]
        else:
            break
    return held


def ratio(a, b) -> float | None:
    return round(a / b, 3) if a and b else None


def verdicts(summary: dict) -> dict:
    """Each goal of the benchmark, met or not (None where its figure is missing)."""
    def within(key):
        v = summary.get(key)
        return None if v is None else abs(v - 1) <= AGREEMENT

    rate = summary.get("rate_held_ratio_stackbook_over_vllm_bench")
    floor = summary.get("ttft_floor_ratio_stackbook_over_vllm_bench")
    return {
        "rate_at_least_2x_vllm_bench": None if rate is None else rate >= RATE_ADVANTAGE,
        "ttft_floor_no_higher_than_vllm_bench": None if floor is None else floor <= 1.0,
        "engine_median_ttft_within_5pct": within("engine_median_ttft_ratio"),
        "engine_median_tpot_within_5pct": within("engine_median_tpot_ratio"),
        "ttft_mean_within_5pct_of_engine_histogram": within("stackbook_vs_engine_histogram_ttft_ratio"),
        "tpot_mean_within_5pct_of_engine_histogram": within("stackbook_vs_engine_histogram_tpot_ratio"),
    }
