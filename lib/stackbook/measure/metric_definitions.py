"""One definition per measurement: each metric, its unit and what it is computed from.

Every figure the sweep, the self-test, the analyses and the benchmarks report for TTFT, TPOT,
ITL, E2E, schedule lag, achieved rate and requests in flight comes from the function here, so
that two tables never disagree on what a name means. `METRICS` lists them with their unit and
the record fields (or other metrics) each depends on.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

@dataclass(frozen=True)
class Metric:
    """A metric under its name: its unit, the fields or metrics it is computed from, and the function."""
    name: str
    unit: str
    depends_on: tuple[str, ...]
    compute: Callable


def output_tokens(r) -> int:
    """N, the output tokens of a reply: the server's usage count, else the client tokenizer's."""
    return r.output_tokens_server if r.output_tokens_server is not None else r.output_tokens_client


def ttft_s(r) -> float | None:
    """Time to first token: first content chunk - sent (None without a content chunk)."""
    return r.first_token_s - r.sent_s if r.first_token_s is not None else None


def ttft_ms(r) -> float | None:
    first = ttft_s(r)
    return first * 1000 if first is not None else None


def e2e_s(r) -> float:
    """End to end: last byte of the reply - sent."""
    return r.end_s - r.sent_s


def e2e_ms(r) -> float:
    return e2e_s(r) * 1000


def tpot_ms(r) -> float | None:
    """Time per output token after the first: (E2E - TTFT) / (N - 1); None for N <= 1."""
    first, n = ttft_ms(r), output_tokens(r)
    return (e2e_ms(r) - first) / (n - 1) if first is not None and n > 1 else None


def norm_e2e_ms(r) -> float | None:
    """E2E over the N output tokens (None for an empty reply)."""
    n = output_tokens(r)
    return e2e_ms(r) / n if n else None


def itl_ms(r) -> list:
    """Chunk inter-token latencies: every gap between consecutive content chunks."""
    return list(np.diff(r.chunk_times_s) * 1000) if len(r.chunk_times_s) > 1 else []


def schedule_lag_s(r) -> float:
    """How late a request was sent against its deadline: sent - scheduled."""
    return r.sent_s - r.scheduled_s


def schedule_lag_ms(r) -> float:
    return schedule_lag_s(r) * 1000


def rate_rps(times: Iterable[float]) -> float | None:
    """Events per second over a series of timestamps: (count - 1) / (last - first); None for
    fewer than two, or all at one instant."""
    t = sorted(times)
    return (len(t) - 1) / (t[-1] - t[0]) if len(t) > 1 and t[-1] > t[0] else None


def achieved_rate_rps(records: Sequence) -> float | None:
    """The rate the client sent at, from the requests' send times."""
    return rate_rps(r.sent_s for r in records)


def scheduled_rate_rps(records: Sequence) -> float | None:
    """The schedule's own rate over the same requests (a short Poisson sample strays from its mean)."""
    return rate_rps(r.scheduled_s for r in records)


def in_flight_mean(records: Sequence, start: float, end: float) -> float | None:
    """The time-weighted mean number of these requests in flight over [start, end]."""
    span = end - start
    busy = sum(max(0.0, min(r.end_s, end) - max(r.sent_s, start)) for r in records)
    return busy / span if span > 0 else None


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("ttft_ms", "ms", ("sent_s", "first_token_s"), ttft_ms),
    Metric("e2e_ms", "ms", ("sent_s", "end_s"), e2e_ms),
    Metric("tpot_ms", "ms/token", ("ttft_ms", "e2e_ms", "output_tokens"), tpot_ms),
    Metric("norm_e2e_ms", "ms/token", ("e2e_ms", "output_tokens"), norm_e2e_ms),
    Metric("itl_ms", "ms", ("chunk_times_s",), itl_ms),
    Metric("output_tokens", "tokens", ("output_tokens_server", "output_tokens_client"), output_tokens),
    Metric("schedule_lag_ms", "ms", ("scheduled_s", "sent_s"), schedule_lag_ms),
    Metric("achieved_rate_rps", "requests/s", ("sent_s",), achieved_rate_rps),
    Metric("scheduled_rate_rps", "requests/s", ("scheduled_s",), scheduled_rate_rps),
    Metric("in_flight_mean", "requests", ("sent_s", "end_s"), in_flight_mean),
)}
