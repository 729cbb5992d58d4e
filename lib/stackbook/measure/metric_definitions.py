"""One definition per measurement: each metric, its unit, what it is computed from and the names
it is stored and compared under.

Every figure the sweep, the self-test, the analyses and the benchmarks report for TTFT, TPOT,
ITL, E2E, schedule lag, achieved rate and requests in flight comes from the function here, so
that two tables never disagree on what a name means. `METRICS` lists them with their unit, the
record fields (or other metrics) each depends on, the statistics a point summary keeps of it and
those the decision rule may compare: the summary's columns, the protocol's allowed names and the
compared figures' labels are all read from it, so a new metric is one entry.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Literal, Mapping, Sequence

import numpy as np

# The statistics a point summary keeps of a per-request metric, each stored as `<metric>_<statistic>`.
STATISTICS = ("mean", "p50", "p95", "p99", "max")
INTERVAL = "ci95"  # the half-width of the mean's 95% interval, kept where a metric asks for it


@dataclass(frozen=True)
class Metric:
    """A metric under its name: its unit, the fields or metrics it is computed from, and the function.

    The rest says where it shows: `label` the words a table or decision names it by; `short` the
    stem the protocol compares it under (ttft -> ttft_p50); `summarized` over which requests a point
    summary keeps its STATISTICS ("answered": the measured requests that were answered, "sent": every
    request of the point); `interval` whether the summary keeps its mean's interval too; `compared`
    the statistics the decision rule may compare (None: the figure itself), `decided` those it
    compares unless a protocol names others."""
    name: str
    unit: str
    depends_on: tuple[str, ...]
    compute: Callable
    label: str = ""
    short: str = ""
    summarized: Literal["answered", "sent"] | None = None
    interval: bool = False
    compared: tuple[str | None, ...] = ()
    decided: tuple[str | None, ...] = ()
    higher_is_better: bool = False

    @property
    def shown_unit(self) -> str:
        """The unit a figure is written with: a time per token reads in ms, its name saying per token."""
        return self.unit.removesuffix("/token")


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


def output_throughput_tok_s(tokens: int, window_s: float) -> float | None:
    """Output tokens streamed a second over a measurement window (None for an empty window)."""
    return tokens / window_s if window_s > 0 else None


# Compared figures come out in this order (decisions, per-load tables), summary statistics too.
METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("output_throughput_tok_s", "tok/s", ("chunk_times_s", "chunk_tokens"), output_throughput_tok_s,
           label="output throughput", short="output_throughput", compared=(None,), decided=(None,),
           higher_is_better=True),
    Metric("ttft_ms", "ms", ("sent_s", "first_token_s"), ttft_ms, label="TTFT", short="ttft",
           summarized="answered", interval=True, compared=("p50",), decided=("p50",)),
    Metric("tpot_ms", "ms/token", ("ttft_ms", "e2e_ms", "output_tokens"), tpot_ms, label="TPOT", short="tpot",
           summarized="answered", interval=True, compared=("p50",), decided=("p50",)),
    Metric("itl_ms", "ms", ("chunk_times_s",), itl_ms, label="chunk ITL", short="itl", summarized="answered",
           compared=("p50",)),
    Metric("e2e_ms", "ms", ("sent_s", "end_s"), e2e_ms, label="E2E", short="e2e", summarized="answered",
           interval=True, compared=("p50", "p99"), decided=("p50", "p99")),
    Metric("norm_e2e_ms", "ms/token", ("e2e_ms", "output_tokens"), norm_e2e_ms, label="norm E2E",
           summarized="answered"),
    Metric("output_tokens", "tokens", ("output_tokens_server", "output_tokens_client"), output_tokens),
    Metric("schedule_lag_ms", "ms", ("scheduled_s", "sent_s"), schedule_lag_ms, label="schedule lag",
           summarized="sent"),
    Metric("achieved_rate_rps", "requests/s", ("sent_s",), achieved_rate_rps),
    Metric("scheduled_rate_rps", "requests/s", ("scheduled_s",), scheduled_rate_rps),
    Metric("in_flight_mean", "requests", ("sent_s", "end_s"), in_flight_mean),
)}


# --------------------------------------------------------------------------- names, from the list

def column(metric: str, statistic: str | None = None, metrics: Mapping[str, Metric] = METRICS) -> str:
    """The stored column of a metric's statistic: column("tpot_ms", "p50") -> "tpot_ms_p50"; without
    a statistic the metric's own name (a figure of the whole point, such as its throughput)."""
    m = metrics[metric]
    if statistic is None:
        return m.name
    if statistic not in (*STATISTICS, INTERVAL):
        raise ValueError(f"{statistic!r} is not a statistic a summary keeps: {(*STATISTICS, INTERVAL)}")
    return f"{m.name}_{statistic}"


def columns(*wanted: tuple[str, ...], metrics: Mapping[str, Metric] = METRICS) -> tuple[str, ...]:
    """Several metrics' statistics in the order asked: columns(("ttft_ms", "p50", "p99"), ("e2e_ms", "p50"))
    -> the TTFT p50 and p99 columns, then the E2E p50 column."""
    return tuple(column(m, s, metrics) for m, *stats in wanted for s in stats)


def summarized(over: str, metrics: Mapping[str, Metric] = METRICS) -> tuple[Metric, ...]:
    """The metrics a point summary keeps statistics of over these requests ("answered" or "sent")."""
    return tuple(m for m in metrics.values() if m.summarized == over)


def summary_columns(metrics: Mapping[str, Metric] = METRICS) -> tuple[str, ...]:
    """Every statistic column a point summary stores of a per-request metric."""
    return tuple(column(m.name, s, metrics) for m in metrics.values() if m.summarized
                 for s in (*STATISTICS, *((INTERVAL,) if m.interval else ())))


def percentile(statistic: str | None) -> int | None:
    """p99 -> 99; a mean or the figure itself has none."""
    return int(statistic[1:]) if statistic and statistic[0] == "p" and statistic[1:].isdigit() else None


@dataclass(frozen=True)
class Figure:
    """One statistic of a metric as the decision rule compares it: its name in the protocol, its
    column in the points, its words, unit and direction; a percentile ranks only where every
    repetition's sample supports it."""
    name: str
    column: str
    label: str
    unit: str
    higher_is_better: bool
    percentile: int | None = None


def figure(metric: str, statistic: str | None = None, metrics: Mapping[str, Metric] = METRICS) -> Figure:
    """The compared figure of a metric's statistic: figure("tpot_ms", "p50").name -> "tpot_p50"."""
    m = metrics[metric]
    name = f"{m.short}_{statistic}" if statistic else m.short
    label = f"{m.label} {statistic}" if statistic else m.label
    return Figure(name, column(metric, statistic, metrics), label, m.shown_unit, m.higher_is_better,
                  percentile(statistic))


def compared_figures(metrics: Mapping[str, Metric] = METRICS) -> tuple[Figure, ...]:
    """Every figure the decision rule may compare, in the list's order."""
    return tuple(figure(m.name, s, metrics) for m in metrics.values() for s in m.compared)


def compared_names(metrics: Mapping[str, Metric] = METRICS) -> tuple[str, ...]:
    """The names a protocol's decision may list (decision.metrics, decision.primary)."""
    return tuple(f.name for f in compared_figures(metrics))


def decided_names(metrics: Mapping[str, Metric] = METRICS) -> list[str]:
    """The figures compared when a protocol names none."""
    return [figure(m.name, s, metrics).name for m in metrics.values() for s in m.decided]


def acronyms(metrics: Mapping[str, Metric] = METRICS) -> dict[str, str]:
    """Stems written in capitals in a column's title: a metric whose label spells its stem so."""
    return {m.short: m.short.upper() for m in metrics.values() if m.short and m.short.upper() in m.label.split()}
