"""Latency and throughput under explicit names, from raw records.

TTFT = first content chunk - sent. Chunk ITL = gaps between content chunks.
TPOT = (E2E - TTFT) / (N - 1), N output tokens (server usage, else the client tokenizer).
Normalized E2E = E2E / N. Failed requests stay in the denominator of goodput.
Throughput is the workload's: the known-answer sentinels mixed into each point are counted apart
(sentinel_*), so a figure compared across arms or set against a bound is the workload's own.
"""
from __future__ import annotations

import bisect
import math
from collections import Counter

import numpy as np
import pandas as pd

from stackbook.loadgen.records import RequestRecord
from stackbook.loadgen.phases import MEASURED_LOAD, Phase
from stackbook.measure.steady_state import GREW, TOO_FEW, steady_state
from stackbook.stats import mean_ci95, sample_percentile
from stackbook.measure.metric_definitions import (
    INTERVAL,
    METRICS,
    STATISTICS,
    column,
    percentile,
    e2e_ms,
    e2e_s,
    in_flight_mean,
    itl_ms,
    norm_e2e_ms,
    output_tokens,
    rate_rps,
    schedule_lag_s,
    summarized,
    tpot_ms,
    ttft_ms,
    ttft_s,
)



def request_metrics(r: RequestRecord) -> dict:
    """Per-request latencies in milliseconds (None where undefined, e.g. a failed request)."""
    n = output_tokens(r)
    e2e = e2e_ms(r)
    return {"point": r.point, "phase": r.phase.value, "repetition": r.repetition, "concurrency": r.concurrency,
            "request_index": r.request_index, "ok": r.ok, "error_class": r.error_class,
            "ttft_ms": ttft_ms(r), "tpot_ms": tpot_ms(r), "e2e_ms": e2e, "norm_e2e_ms": norm_e2e_ms(r),
            "itl_ms": itl_ms(r), "output_tokens": n, "output_tokens_client": r.output_tokens_client,
            "output_tokens_requested": r.output_tokens_requested, "length_controlled": r.length_controlled,
            "turn": r.turn,
            "prompt_tokens": r.prompt_tokens_server if r.prompt_tokens_server is not None else r.prompt_tokens_client,
            "cached_prompt_tokens": r.cached_prompt_tokens, "finish_reason": r.finish_reason,
            "sent_s": r.sent_s, "end_s": r.end_s}


def requests_frame(records: list[RequestRecord]) -> pd.DataFrame:
    return pd.DataFrame([request_metrics(r) for r in records])


def _stats(values, prefix: str) -> dict:
    v = np.asarray([x for x in values if x is not None and not (isinstance(x, float) and math.isnan(x))], float)
    if v.size == 0:
        return {f"{prefix}_{k}": None for k in STATISTICS}
    out = {f"{prefix}_mean": float(v.mean()), f"{prefix}_max": float(v.max())}
    out.update({f"{prefix}_{k}": sample_percentile(v, percentile(k)) for k in STATISTICS if percentile(k)})
    return out


def meets_slo(row: dict, slo) -> bool:
    if not row["ok"] or row["ttft_ms"] is None:
        return False
    if row["ttft_ms"] > slo.ttft_ms:
        return False
    if row["tpot_ms"] is not None and row["tpot_ms"] > slo.tpot_ms:
        return False
    if slo.e2e_ms is not None and row["e2e_ms"] > slo.e2e_ms:
        return False
    return True




def window_activity(records: list[RequestRecord], start: float, end: float) -> dict:
    """What these requests did inside [start, end]: tokens streamed, requests finished, and the
    time-weighted number in flight. A request only partly inside counts for its part."""
    tokens = sum(n for r in records for t, n in zip(r.chunk_times_s, r.chunk_tokens) if start <= t <= end)
    finished = sum(1 for r in records if r.ok and start <= r.end_s <= end)
    return {"tokens": tokens, "finished": finished, "in_flight_mean": in_flight_mean(records, start, end)}


def throughput(activity: dict, window: float, mean_prompt_tokens: float) -> dict:
    """Output tokens, requests and output plus prompt tokens a second over the window (None for an
    empty window); prompt tokens are counted once per finished request, at the measured mean."""
    if window <= 0:
        return {"output_throughput_tok_s": None, "request_throughput_rps": None, "total_throughput_tok_s": None}
    return {"output_throughput_tok_s": activity["tokens"] / window,
            "request_throughput_rps": activity["finished"] / window,
            "total_throughput_tok_s": (activity["tokens"] + activity["finished"] * mean_prompt_tokens) / window}


# The figures that count the workload's requests alone; a point recorded before the sentinels were
# counted apart lacks the sentinels' own figures, and its throughput counted them too.
WORKLOAD_THROUGHPUT = ("output_throughput_tok_s", "request_throughput_rps", "total_throughput_tok_s", "goodput_rps")


def sentinels_counted_apart(point: dict) -> bool:
    """Whether a stored point's throughput is the workload's alone (it states the sentinels' own)."""
    return "sentinel_requests" in point


def sentinel_figures(records: list[RequestRecord], start: float, end: float) -> dict:
    """The sentinels' share of the window, reported beside the workload's throughput so that
    what the engine did in all is the sum of the two."""
    mine = [r for r in records if r.phase == Phase.SENTINEL]
    activity = window_activity(mine, start, end)
    window = end - start
    return {"sentinel_requests": len(mine),
            "sentinel_throughput_rps": activity["finished"] / window if window > 0 else None,
            "sentinel_output_throughput_tok_s": activity["tokens"] / window if window > 0 else None}


# Which requests both sides of the load check count, stated in every sweep summary so that an
# audit compares the figures only with a run that counted the same way.
LOAD_CHECK_COUNTS = "measured requests and sentinels, answered or failed, on both sides"


def measured_load(records: list[RequestRecord], start: float, end: float) -> dict:
    """The load check's two sides, over one set of requests: the measured ones with their
    sentinels, answered or failed (a failed request held its slot as long as it lasted). One side
    is their time-weighted number in flight inside the window; the other Little's law, the rate at
    which they ended inside the window times their mean time in system. The two part only at the
    window's edges, which is what the check is for. Warm-up and cool-down requests keep the engine
    busy at the edges, but they are not the load being measured, so they count for neither."""
    mine = [r for r in records if r.phase in MEASURED_LOAD]
    ended = [r for r in mine if start <= r.end_s <= end]
    span = end - start
    out = {"in_flight_mean": in_flight_mean(mine, start, end), "littles_law_concurrency": None}
    if ended and span > 0:
        out["littles_law_concurrency"] = len(ended) / span * sum(e2e_s(r) for r in ended) / len(ended)
    return out


def client_gaps(records: list[RequestRecord]) -> dict:
    """A closed loop's own gap: for each request sent after another ended, the time from the
    latest end before its send to the send (the client turning a reply into the next request).
    Against a sub-millisecond server this gap is as long as the service itself, so it is counted
    apart from the requests in flight, not as load the client failed to deliver.

    client_gap_in_flight: the time-weighted mean number of clients inside such a gap over the
    measurement window; client_gap_ms_p99: how long the client's own gaps were."""
    measured = [r for r in records if r.phase == Phase.MEASURE]
    if not measured:
        return {}
    start, end = min(r.sent_s for r in measured), max(r.end_s for r in measured)
    ends = sorted(r.end_s for r in records)
    gaps = []
    for r in records:
        i = bisect.bisect_right(ends, r.sent_s)  # the latest end at or before the send
        if i:
            gaps.append((ends[i - 1], r.sent_s))
    inside = sum(max(0.0, min(s, end) - max(e, start)) for e, s in gaps)
    span = end - start
    out = {"client_gap_in_flight": inside / span if span > 0 else None}
    out.update(_stats([(s - e) * 1000 for e, s in gaps], "client_gap_ms"))
    return {k: v for k, v in out.items() if k in ("client_gap_in_flight", "client_gap_ms_p50", "client_gap_ms_p99")}


def answered_figures(answered: list[RequestRecord], metrics=METRICS) -> dict:
    """The statistics of every metric the list summarizes over the answered requests (a list-valued
    metric, such as the chunk gaps, pooled over them), and the intervals of those that ask."""
    named = summarized("answered", metrics)
    values = {m.name: [m.compute(r) for r in answered] for m in named}
    pooled = {k: [x for v in vs for x in (v if isinstance(v, list) else [v])] for k, vs in values.items()}
    out = {}
    for m in named:
        out.update(_stats(pooled[m.name], m.name))
    out.update({column(m.name, INTERVAL, metrics): mean_ci95(pooled[m.name])[1] for m in named if m.interval})
    return out


def point_summary(records: list[RequestRecord], slo) -> dict:
    """Aggregate one sweep point. Latencies come from the measured requests only; throughput
    is what the workload's requests streamed inside the measurement window (first measured send to
    last measured end), warm-up and cool-down included since they keep the configured concurrency
    at its edges. The sentinels' own throughput is reported apart."""
    measured = [r for r in records if r.phase == Phase.MEASURE]
    rows = [request_metrics(r) for r in measured]
    ok = [row for row in rows if row["ok"]]
    out: dict = {"requests": len(rows), "completed": len(ok),
                 "errors": dict(Counter(row["error_class"] for row in rows if not row["ok"]))}
    if not measured:
        return out
    start, end = min(r.sent_s for r in measured), max(r.end_s for r in measured)
    window = end - start
    out["window_s"] = window
    workload = window_activity([r for r in records if r.phase != Phase.SENTINEL], start, end)
    out.update(answered_figures([r for r in measured if r.ok]))
    out["output_tokens"] = sum(x["output_tokens"] for x in ok)
    mean_prompt = sum(x["prompt_tokens"] for x in ok) / len(ok) if ok else 0
    out.update(throughput(workload, window, mean_prompt))
    out.update(sentinel_figures(records, start, end))
    good = [x for x in rows if meets_slo(x, slo)]
    out["slo_attainment"] = len(good) / len(rows)
    out["goodput_rps"] = (out["request_throughput_rps"] or 0) * out["slo_attainment"]
    out.update(measured_load(records, start, end))
    out["engine_in_flight_mean"] = in_flight_mean(records, start, end)  # every request: what the engine held
    # Open-loop fidelity: how late each send was against its deadline, and the rate achieved.
    for m in summarized("sent"):
        out.update(_stats([m.compute(r) for r in records], m.name))
    # The schedule's own rate over the measured window (a short Poisson sample strays from its
    # mean), against the rate the client achieved; sentinels are sent on the same schedule,
    # among the measured requests, so they count: this is the load the engine was offered.
    offered = [r for r in records if r.phase in MEASURED_LOAD]
    out["scheduled_rate_rps"] = rate_rps([r.scheduled_s for r in offered])
    out["achieved_rate_rps"] = rate_rps([r.sent_s for r in offered])
    # How many sends the client held back past their deadlines, on average over the window: what
    # a session replay's lateness is judged by (measure.validity.sends_held).
    out["schedule_lag_in_flight"] = (sum(max(0.0, schedule_lag_s(r)) for r in offered) / window
                                     if window > 0 else None)
    # Per-stream decode rate: what one user sees once tokens flow.
    rates = [1000 / x["tpot_ms"] for x in ok if x["tpot_ms"]]
    out["decode_tok_s_per_stream_mean"], out["decode_tok_s_per_stream_ci95"] = mean_ci95(rates)
    short = [x for x in ok if x["length_controlled"] and x["output_tokens"] < x["output_tokens_requested"]]
    out["length_not_honoured"] = len(short)
    out.update(connection_setup(records))
    # Whether the queue grew while the point was measured: an open loop past capacity keeps
    # growing it, and its percentiles then describe the point's length, not the load.
    state = steady_state(measured)
    out["steady_state"] = state.as_dict()
    open_loop = all(r.concurrency == 0 for r in measured)  # an open loop sends without a concurrency
    out["queue_grew"] = (state.verdict == GREW) if open_loop and state.verdict != TOO_FEW else None
    return out



def connection_setup(records: list[RequestRecord]) -> dict:
    """Connections opened during the point (warm-up included, where most are) and what their set-up
    (TCP, TLS) cost: part of those requests' TTFT, shown apart so a handshake to a distant host is
    not read as the engine's prefill."""
    times = [r.connect_s * 1000 for r in records if r.connect_s is not None]
    return {"connections_opened": len(times), "connect_ms_max": max(times) if times else None,
            "connect_ms_mean": sum(times) / len(times) if times else None,
            "measured_requests_on_new_connections": sum(r.connect_s is not None for r in records
                                                        if r.phase == Phase.MEASURE)}


# --------------------------------------------------------------------------- peer definitions

def peer_definitions(records: list[RequestRecord]) -> pd.DataFrame:
    """The same measured requests under each tool's own definitions, side by side.

    The label "ITL" or "TPOT" means different numbers in different tools; this table shows by
    how much on this run. Definitions (from each tool's source, see the research notes):
    - vLLM bench serve: TTFT at the first SSE event with a choice (even an empty role chunk);
      ITL = every gap between SSE events, pooled over requests; TPOT = (E2E - TTFT)/(N - 1),
      N from server usage.
    - GuideLLM: TTFT at the first content; its ITL = (last token - first token)/(N - 1) per
      request, weighted by N - 1; its TPOT = (last token - start)/N, first token included.
    - AIPerf: TTFT at the first non-empty content; its ITL = (E2E - TTFT)/(OSL - 1) per request,
      OSL from the client tokenizer; per-chunk gaps are its ICL.
    """
    rows = {"stackbook": {}, "vllm bench serve": {}, "GuideLLM": {}, "AIPerf": {}}
    ttft_vllm, ttft, itl_chunks, tpot_server, guide_itl, guide_w, guide_tpot, aiperf_itl = ([] for _ in range(8))
    for r in records:
        if r.phase != Phase.MEASURE or not r.ok or r.first_token_s is None:
            continue
        n_server = output_tokens(r)
        e2e = e2e_s(r)
        first = ttft_s(r)
        ttft.append(ttft_ms(r))
        ttft_vllm.append(((r.first_event_s if r.first_event_s is not None else r.first_token_s) - r.sent_s) * 1000)
        itl_chunks.extend(itl_ms(r))
        last = r.chunk_times_s[-1] - r.sent_s
        if n_server > 1:
            tpot_server.append(tpot_ms(r))
            guide_itl.append((last - first) / (n_server - 1) * 1000)
            guide_w.append(n_server - 1)
        if n_server:
            guide_tpot.append(last / n_server * 1000)
        if r.output_tokens_client > 1:
            aiperf_itl.append((e2e - first) / (r.output_tokens_client - 1) * 1000)

    def put(tool, label, values, definition, weights=None):
        v = np.asarray(values, float)
        if v.size == 0:
            rows[tool][label] = {"definition": definition, "p50": None, "mean": None, "p99": None}
            return
        if weights is not None:
            w = np.asarray(weights, float)
            order = np.argsort(v)
            cdf = np.cumsum(w[order]) / w.sum()
            pick = lambda q: float(v[order][np.searchsorted(cdf, q)])  # noqa: E731 - inverse weighted CDF
            rows[tool][label] = {"definition": definition, "p50": pick(0.5), "mean": float(np.average(v, weights=w)),
                                 "p99": pick(0.99)}
        else:
            rows[tool][label] = {"definition": definition, "p50": sample_percentile(v, 50),
                                 "mean": float(v.mean()), "p99": sample_percentile(v, 99)}

    put("stackbook", "TTFT", ttft, "first content chunk - sent")
    put("stackbook", "chunk ITL", itl_chunks, "gap between content chunks, pooled")
    put("stackbook", "TPOT", tpot_server, "(E2E - TTFT)/(N - 1), N = server usage")
    put("vllm bench serve", "TTFT", ttft_vllm, "first SSE event with a choice - sent")
    put("vllm bench serve", "ITL", itl_chunks, "gap between SSE events, pooled")
    put("vllm bench serve", "TPOT", tpot_server, "(E2E - TTFT)/(N - 1), N = server usage")
    put("GuideLLM", "TTFT", ttft, "first content - start")
    put("GuideLLM", "ITL", guide_itl, "(last - first token)/(N - 1), weighted by N - 1", weights=guide_w)
    put("GuideLLM", "TPOT", guide_tpot, "(last token - start)/N, first token included")
    put("AIPerf", "TTFT", ttft, "first non-empty content - start")
    put("AIPerf", "ITL", aiperf_itl, "(E2E - TTFT)/(OSL - 1), OSL = client tokenizer")
    put("AIPerf", "ICL", itl_chunks, "gap between chunks, pooled")
    frame = pd.DataFrame([{"tool": tool, "label": label, **vals} for tool, d in rows.items()
                          for label, vals in d.items()])
    return frame.set_index(["tool", "label"])
