"""The open-queue formulas checked against measured open-loop points: per point, the realized
arrival variability C_a, the service times and their C_s, the utilisation, the measured mean
queue wait, and Kingman's and Pollaczek-Khinchine's prediction of it with the error.

How the wait is measured depends on the engine's kind of server, so each kind of server says it:
one request at a time in arrival order (llama-server with one slot) gives every wait and service
time exactly from the client's own timestamps; an engine that batches several sequences is not a
G/G/1 queue, and its wait is read from the engine's queue histogram or estimated from TTFT.
Arithmetic is pure; records are read at the edge (`read_point_records`)."""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from stackbook.analysis.queueing import UNSTABLE, predict_wait
from stackbook.config.arrival_patterns import ArrivalLaw
from stackbook.loadgen.phases import Phase
from stackbook.loadgen.records import RequestRecord, read_records
from stackbook.measure.metric_definitions import rate_rps, ttft_ms
from stackbook.stats import mean_ci95

SERVED_IN_WINDOW = (Phase.MEASURE, Phase.SENTINEL)  # the load the server saw while the measured requests ran
BATCHES_FOR_CI = 10


# --------------------------------------------------------------------------- pure arithmetic

def lindley(sent_s: Sequence[float], end_s: Sequence[float]) -> tuple[list[float], list[float]]:
    """Waits and service times of a single server from arrival and departure times alone
    (Lindley's recursion): a request starts when it arrives or when the request served before it
    leaves, whichever is later; it waits start - sent and is served end - start.

    One server serves one request at a time, but not necessarily in arrival order (llama-server
    with one slot may give a freed slot to a request that has just arrived before one it had
    deferred), so the request served before another is the one that ended before it: the
    recursion runs in completion order. For a server that does not choose by service time the
    mean wait is the same in any such order as in FIFO, which is what Kingman and P-K predict.
    Returns waits and services in the order given."""
    if len(sent_s) != len(end_s):
        raise ValueError(f"{len(sent_s)} send times against {len(end_s)} end times")
    if any(end < sent for sent, end in zip(sent_s, end_s)):
        raise ValueError("a request ended before it was sent: send and end times are from different clocks")
    waits, services = [0.0] * len(sent_s), [0.0] * len(sent_s)
    free_at = -math.inf
    for i in sorted(range(len(sent_s)), key=lambda k: (end_s[k], sent_s[k])):
        start = max(sent_s[i], free_at)
        waits[i], services[i] = start - sent_s[i], end_s[i] - start
        free_at = end_s[i]
    return waits, services


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    """Standard deviation over the mean (the sample's, ddof = 1); None for fewer than two values
    or a zero mean."""
    v = np.asarray(values, float)
    if v.size < 2 or v.mean() == 0:
        return None
    return float(v.std(ddof=1) / v.mean())


def inter_arrival_cv(sent_s: Sequence[float]) -> float | None:
    """C_a of the realized arrivals: the CV of the gaps between consecutive sends."""
    return coefficient_of_variation(np.diff(np.sort(np.asarray(sent_s, float))))


def arrival_rate(sent_s: Sequence[float]) -> float | None:
    """The realized arrival rate: one over the mean gap between consecutive sends."""
    return rate_rps(np.asarray(sent_s, float))


def batch_means_ci95(values: Sequence[float], batches: int = BATCHES_FOR_CI) -> tuple[float | None, float | None]:
    """Mean and 95% half-width by batch means: successive waits in a queue are correlated (a
    long wait is followed by long waits), so the iid interval is too narrow; the means of
    consecutive batches are close to independent and take the t interval instead."""
    v = np.asarray(values, float)
    if v.size == 0:
        return None, None
    k = max(2, min(batches, v.size // 5))
    if v.size < 2 * k:
        return float(v.mean()), None
    means = [float(b.mean()) for b in np.array_split(v, k)]
    return float(v.mean()), mean_ci95(means)[1]


def relative_error_pct(predicted: float | None, measured: float | None) -> float | None:
    if predicted is None or measured is None or measured <= 0:
        return None
    return 100 * (predicted - measured) / measured


# --------------------------------------------------------------------------- kinds of server

@dataclass(frozen=True)
class PointData:
    """One sweep point as the server models read it: its records in send order (every phase:
    warm-up and cool-down requests were served too), the point's summary from results.json, and
    the arm's reference TTFT at its lightest load (ms; None when this point is that load)."""
    records: list[RequestRecord]
    summary: dict
    light_load_ttft_ms: float | None


@dataclass(frozen=True)
class MeasuredQueue:
    """What a point's data says about its queue (milliseconds; None where it cannot say)."""
    wait_ms_mean: float | None
    wait_ms_ci95: float | None
    wait_source: str
    throughput_rps: float | None = None  # the window's requests served per second, first send to last end
    service_ms_mean: float | None = None
    service_cv: float | None = None
    gg1_applies: bool = False
    note: str = ""


def _window(records: list[RequestRecord]) -> tuple[float, float] | None:
    measured = [r for r in records if r.phase == Phase.MEASURE]
    if not measured:
        return None
    return min(r.sent_s for r in measured), max(r.end_s for r in measured)


@dataclass(frozen=True)
class SingleServerFifo:
    """One sequence served at a time, in arrival order: a G/G/1 queue. Waits and service times
    follow exactly from the client's send and end times (Lindley), run over every request the
    server got (warm-up, sentinels and cool-down too: they occupied it); the statistics are taken
    over the measured window: waits of the measured requests, service of everything sent in it."""
    name: str = "single server (G/G/1)"

    def measure(self, point: PointData) -> MeasuredQueue:
        source = "Lindley's recursion (completion order) on the client's send and end times"
        records = sorted(point.records, key=lambda r: r.sent_s)
        window = _window(records)
        if window is None:
            return MeasuredQueue(None, None, source, note="no measured request")
        waits, services = lindley([r.sent_s for r in records], [r.end_s for r in records])
        measured = [w for r, w in zip(records, waits) if r.phase == Phase.MEASURE and r.ok]
        stream = [(r, s) for r, s in zip(records, services) if r.phase in SERVED_IN_WINDOW and r.ok]
        served = [s for _, s in stream]
        mean, ci = batch_means_ci95([w * 1000 for w in measured])
        span = max(r.end_s for r, _ in stream) - min(r.sent_s for r, _ in stream) if stream else 0.0
        return MeasuredQueue(mean, ci, source, throughput_rps=len(stream) / span if span > 0 else None,
                             service_ms_mean=float(np.mean(served)) * 1000 if served else None,
                             service_cv=coefficient_of_variation(served), gg1_applies=True)


@dataclass(frozen=True)
class BatchingServer:
    """Several sequences served together (continuous batching): no single service time per
    request and no one queue in the G/G/1 sense, so Kingman and P-K do not apply as such. The
    wait is the engine's own queue-time histogram mean where the point records it, otherwise
    the mean TTFT above the arm's light-load TTFT (the time a request spent before its first
    token that an unloaded engine would not have taken)."""
    slots: float | None
    name: str = "batching server"

    def measure(self, point: PointData) -> MeasuredQueue:
        note = (f"{self.slots:g} sequences served together" if self.slots else "sequences served together: "
                "the engine's concurrency is not recorded") + ": G/G/1 does not apply as such"
        engine_queue = engine_queue_ms(point.summary)
        if engine_queue is not None:
            return MeasuredQueue(engine_queue, None, "the engine's queue-time histogram (mean)", note=note)
        source = "mean TTFT − light-load TTFT"
        if point.light_load_ttft_ms is None:
            return MeasuredQueue(None, None, source, note=note + "; the arm's lightest load is itself the "
                                 "unqueued TTFT reference")
        ttft = [ttft_ms(r) for r in sorted(point.records, key=lambda r: r.sent_s)
                if r.phase == Phase.MEASURE and r.ok and r.first_token_s is not None]
        mean, ci = batch_means_ci95(ttft)
        return MeasuredQueue(None if mean is None else mean - point.light_load_ttft_ms, ci, source, note=note)


def engine_queue_ms(summary: dict) -> float | None:
    """The engine's mean queue time per request over the point (`engine_time_ms["queue"]`, ms,
    from its histograms), None where the point does not record it (llama-server exports none)."""
    value = (summary.get("engine_time_ms") or {}).get("queue")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def concurrent_sequences(spec, engine: dict) -> float | None:
    """How many sequences the arm's engine serves at once: the tighter of the cap its configuration
    sets (the kind says which field: llama.cpp's slots, vLLM's max_num_seqs, ...) and the
    concurrency its realized capacity allows (e.g. vLLM's KV room for 22.75 sequences, capped at
    max_num_seqs 4, serves 4). None where neither states one."""
    realized = (engine.get("realized_capacity") or {}).get("max_concurrency")
    caps = [c for c in (spec.sequences_at_once() if spec is not None else None, realized)
            if isinstance(c, (int, float)) and not isinstance(c, bool)]
    return min(caps) if caps else None


def server_model(spec, engine: dict) -> SingleServerFifo | BatchingServer:
    """A single server when the engine serves one sequence at a time; else a batching one
    (also when unknown: the exact single-server reading is only claimed where it holds)."""
    slots = concurrent_sequences(spec, engine)
    return SingleServerFifo() if slots == 1 else BatchingServer(slots)


# --------------------------------------------------------------------------- one point, one row

@dataclass(frozen=True)
class OpenLoopPoint:
    """One row of the table: a measured open-loop point beside the formulas' predictions."""
    arm: str
    point: str
    status: str
    arrival: str
    rate_rps: float | None
    scheduled_arrival_scv: float | None
    arrival_cv: float | None
    service_cv: float | None
    arrival_rate_rps: float | None
    utilization: float | None
    throughput_rps: float | None
    service_ms_mean: float | None
    wait_ms_mean: float | None
    wait_ms_ci95: float | None
    kingman_ms: float | None
    pk_ms: float | None
    kingman_error_pct: float | None
    pk_error_pct: float | None
    server: str
    wait_source: str
    outcome: str


def analyse_point(arm: str, point: str, status: str, arrivals: ArrivalLaw, server, data: PointData) -> OpenLoopPoint:
    """Measure the point's queue with its server's model and, where G/G/1 applies, set Kingman's
    and P-K's predictions beside it. An overloaded point reads UNSTABLE instead of failing.

    The utilisation is the realized arrival rate (from the same sends that give C_a) times the
    mean service time. In a stable queue it equals throughput x service time, but a server's
    throughput can never exceed 1/S, so only the arrival rate lets an overloaded point show ρ >= 1."""
    window = _window(data.records)
    stream = [r.sent_s for r in data.records if r.phase in SERVED_IN_WINDOW]
    ca = inter_arrival_cv(stream) if window else None
    rate = arrival_rate(stream) if window else None
    q = server.measure(data)
    kingman = pk = None
    outcome = q.note or "measured"
    rho = None
    if q.gg1_applies and rate and q.service_ms_mean is not None and ca is not None and q.service_cv is not None:
        p = predict_wait(rate, q.service_ms_mean / 1000, ca, q.service_cv, arrivals.poisson)
        rho = p.utilization
        kingman = None if p.kingman_s is None else p.kingman_s * 1000
        pk = None if p.pollaczek_khinchine_s is None else p.pollaczek_khinchine_s * 1000
        outcome = UNSTABLE if not p.stable else (q.note or "stable")
    return OpenLoopPoint(
        arm=arm, point=point, status=status, arrival=arrivals.kind, rate_rps=data.summary.get("rate"),
        scheduled_arrival_scv=arrivals.scheduled_scv, arrival_cv=ca, service_cv=q.service_cv, arrival_rate_rps=rate,
        utilization=rho,
        throughput_rps=q.throughput_rps, service_ms_mean=q.service_ms_mean, wait_ms_mean=q.wait_ms_mean,
        wait_ms_ci95=q.wait_ms_ci95, kingman_ms=kingman, pk_ms=pk,
        kingman_error_pct=relative_error_pct(kingman, q.wait_ms_mean),
        pk_error_pct=relative_error_pct(pk, q.wait_ms_mean), server=server.name, wait_source=q.wait_source,
        outcome=outcome)


def light_load_ttft_ms(records_by_point: dict[str, list[RequestRecord]],
                       summaries: dict[str, dict]) -> tuple[str, float] | None:
    """The arm's unqueued TTFT: the median TTFT of the measured requests at its lowest offered
    rate (at light load few requests queue, and the median ignores the ones that did)."""
    rated = [p for p in records_by_point if summaries.get(p, {}).get("rate") is not None]
    if not rated:
        return None
    lightest = min(rated, key=lambda p: summaries[p]["rate"])
    ttft = [ttft_ms(r) for r in records_by_point[lightest]
            if r.phase == Phase.MEASURE and r.ok and r.first_token_s is not None]
    return (lightest, float(np.median(ttft))) if ttft else None


def arm_points(arm: str, arrivals: ArrivalLaw, server: SingleServerFifo | BatchingServer, summaries: dict[str, dict],
               records_by_point: dict[str, list[RequestRecord]], statuses: dict[str, str]) -> list[OpenLoopPoint]:
    """Every open-loop point of one arm, in sweep order."""
    light = light_load_ttft_ms(records_by_point, summaries)
    rows = []
    for point, summary in summaries.items():
        reference = None if light is None or light[0] == point else light[1]
        data = PointData(records_by_point.get(point, []), summary, reference)
        status = statuses.get(point) or ("discarded" if summary.get("discarded") else "accepted")
        rows.append(analyse_point(arm, point, status, arrivals, server, data))
    return rows


# --------------------------------------------------------------------------- the run (I/O at the edge)

def read_point_records(arm_dir) -> dict[str, list[RequestRecord]]:
    """An arm's records (each point's latest attempt), grouped by point, in send order."""
    out: dict[str, list[RequestRecord]] = {}
    for r in sorted(read_records(arm_dir.requests, latest_attempt=True), key=lambda r: r.sent_s):
        out.setdefault(r.point, []).append(r)
    return out


def open_loop_points(campaign, arms: dict, points: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per open-loop point of every arm (closed-loop arms have none). `points` is the
    campaign's comparison frame: each point's status (accepted, or why it is not ranked) comes
    from it, so a discarded point is shown with its rule and kept out of the conclusions."""
    statuses: dict[tuple[str, str], str] = {}
    if points is not None and not points.empty and "status" in points:
        statuses = {(r["arm"], r["point"]): short_status(r["status"]) for _, r in points.iterrows()}
    rows: list[OpenLoopPoint] = []
    for name, a in arms.items():
        arrivals = campaign.protocol_for(a["arm"]).arrival.arrival_law()
        summaries = ((a.get("results") or {}).get("sweep") or {}).get("points") or {}
        if arrivals is None or not summaries:
            continue
        mine = {p: s for (arm, p), s in statuses.items() if arm == name}
        server = server_model(a["arm"].engine, a.get("engine") or {})
        rows += arm_points(name, arrivals, server, summaries, read_point_records(a["dir"]), mine)
    return pd.DataFrame([asdict(r) for r in rows])


def short_status(status: str) -> str:
    """A point's status with each discard rule named and its figures left to the discards table:
    "discarded (on_invalid_load: schedule_lag_ms_p99=11.6, ...)" -> "discarded (on_invalid_load)"."""
    return re.sub(r"(\w+): [^;)]*", r"\1", status).replace("; ", ", ")


def absent_because(campaign, arms: dict) -> str:
    """One line saying why a run has no open-loop point to check the formulas on."""
    if not arms:
        return "No arm of this run has records, so there is no open-loop point to check the queueing formulas on."
    kinds = sorted({campaign.protocol_for(a["arm"]).arrival.kind for a in arms.values()})
    return (f"No open-loop point in this run (arrivals: {', '.join(kinds)}): the open-queue formulas need a "
            "clock-driven arrival stream, and a closed loop is checked by the Mean Value Analysis above.")


DISPLAY_COLUMNS = {
    "arm": "arm", "point": "point", "status": "status", "arrival": "arrival", "arrival_cv": "C_a (measured)",
    "service_cv": "C_s (measured)", "arrival_rate_rps": "λ (req/s)", "utilization": "ρ (λ·S)",
    "service_ms_mean": "service_ms_mean",
    "wait_ms_mean": "wait_ms_mean", "wait_ms_ci95": "wait_ms_ci95", "kingman_ms": "Kingman (ms)",
    "pk_ms": "P-K (ms)", "kingman_error_pct": "Kingman error (%)", "pk_error_pct": "P-K error (%)",
    "outcome": "outcome",
}


def display_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The columns a reader compares, named as the formulas name them."""
    return frame[[c for c in DISPLAY_COLUMNS if c in frame]].rename(columns=DISPLAY_COLUMNS)


def conclusions(frame: pd.DataFrame) -> list[str]:
    """What the accepted points show, in words: at each offered rate run under more than one
    arrival kind, the wait at the least and the most variable arrivals; then each formula's error.
    Discarded and unranked points are left out (they stay in the table, marked)."""
    if frame.empty:
        return []
    ok = frame[(frame["status"] == "accepted") & frame["wait_ms_mean"].notna() & frame["arrival_cv"].notna()]
    if ok.empty:
        return ["No accepted point has a measured wait: nothing to conclude."]
    ok = ok.assign(ca2=ok["arrival_cv"] ** 2)
    lines = []
    for rate, g in ok.groupby("rate_rps"):
        if g["arrival"].nunique() < 2:
            continue
        g = g.sort_values("ca2")
        lo, hi = g.iloc[0], g.iloc[-1]
        rho = g["utilization"].dropna()
        at = f", ρ {rho.min():.2f}–{rho.max():.2f}" if not rho.empty else ""
        lines.append(f"At {rate:g} req/s{at}: measured mean wait {lo['wait_ms_mean']:.0f} ms "
                     f"at C_a² = {lo['ca2']:.2f} ({lo['arrival']}) and {hi['wait_ms_mean']:.0f} ms "
                     f"at C_a² = {hi['ca2']:.2f} ({hi['arrival']}): "
                     + ("more arrival variance, longer waits at the same average load."
                        if hi["wait_ms_mean"] > lo["wait_ms_mean"] else
                        "the waits did not grow with arrival variance here."))
    for model, column in (("Kingman", "kingman_error_pct"), ("P-K", "pk_error_pct")):
        err = ok[column].dropna()
        if not err.empty:
            lines.append(f"{model}: mean absolute error {err.abs().mean():.0f}% over {len(err)} accepted point(s) "
                         f"(from {err.min():+.0f}% to {err.max():+.0f}%).")
    unstable = ok[ok["outcome"] == UNSTABLE]
    if not unstable.empty:
        lines.append(f"{len(unstable)} accepted point(s) ran at ρ ≥ 1: no steady mean wait exists there.")
    return lines or ["No rate was run under more than one arrival kind, and no formula applies to these "
                     "points: the waits are shown, with nothing to compare them with."]
