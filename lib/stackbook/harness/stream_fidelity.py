"""The client's distortion of streamed timings at GPU-scale concurrency, against a known truth.

The paced calibration server (harness.pacing) gives every stream a known TTFT and inter-token
gap and records when it sent each event; a closed loop of N streams runs against it, and each
request's client-side TTFT, TPOT and chunk gaps are set beside the server's own for the same
request (matched by its prompt). Both clocks are the system-wide monotonic clock, so the
client's receive delay of every event is measured directly: its stamp minus the server's send.
The server gets a core of its own and the client the others, where the host has them.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import httpx
import numpy as np

from stackbook.harness.pacing import Pacing
from stackbook.loadgen.client_processes import send_point
from stackbook.loadgen.drivers import Target
from stackbook.loadgen.phases import Phase
from stackbook.loadgen.plans import ClosedPlan
from stackbook.loadgen.workload import ApproximateTokenizer, PromptSpec
from stackbook.measure.metrics import request_metrics
from stackbook.stats import sample_percentile

STREAM_LADDER = [16, 64, 256, 512, 1024]
TRUTH = Pacing(ttft_ms=50.0, gap_ms=10.0)
TOKENS = 128  # per stream
ROUNDS = 3    # requests per stream: the first round is the warm-up (every stream starting at once)


def core_plan() -> dict:
    """Which cores the server and the client get: the last one for the server, the rest for the
    client, on a host with two or more (else both share all, and the plan says so)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cores) < 2:
        return {"server": cores, "client": cores, "separate": False}
    return {"server": [cores[-1]], "client": cores[:-1], "separate": True}


@contextlib.contextmanager
def pinned(cores: list[int]):
    """This process (and the client processes it starts) on `cores` while inside."""
    if not cores or not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, set(cores))
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def paced_log(url: str) -> dict[str, dict]:
    """The server's record of every stream ended since the last call, by key (its prompt)."""
    return {d["key"]: d for d in httpx.get(url + "/paced", timeout=60).json()}


def percentiles(values, key: str) -> dict:
    v = np.asarray(list(values), float)
    if v.size == 0:
        return {f"{key}_p50": None, f"{key}_p99": None}
    return {f"{key}_p50": round(sample_percentile(v, 50), 3), f"{key}_p99": round(sample_percentile(v, 99), 3)}


def truth_of(stream: dict) -> dict:
    """A stream's true TTFT, TPOT and gaps (ms) by the server's own send times; the end is the
    last event's send (it carries the finish and the stream's end)."""
    sent, n = stream["sent"], len(stream["sent"])
    return {"ttft_ms": (sent[0] - stream["arrival"]) * 1000,
            "tpot_ms": (sent[-1] - sent[0]) / (n - 1) * 1000 if n > 1 else None,
            "itl_ms": list(np.diff(sent) * 1000), "lateness_ms": [(s - d) * 1000 for s, d in zip(sent, stream["due"])]}


def truth_summary(streams: list[dict]) -> dict:
    t = [truth_of(s) for s in streams]
    return {**percentiles((x["ttft_ms"] for x in t), "ttft_ms"),
            **percentiles((x["tpot_ms"] for x in t if x["tpot_ms"]), "tpot_ms"),
            **percentiles((g for x in t for g in x["itl_ms"]), "itl_ms"),
            **percentiles((g for x in t for g in x["lateness_ms"]), "server_lateness_ms")}


def distortion(records, log: dict[str, dict], start: float, key=lambda r: f"stream {r.request_index}") -> dict:
    """stackbook's figures for the measured requests beside the truth for the same requests, and
    the client's per-event receive delay (its stamp minus the server's send; of the first event
    alone, the client's own share of TTFT) and request delivery delay (the server's arrival minus
    the client's write: the wire and the server's own wait to read it), in ms."""
    pairs = [(r, log[key(r)]) for r in records if r.phase == Phase.MEASURE and r.ok and key(r) in log]
    m = [request_metrics(r) for r, _ in pairs]
    client = {**percentiles((x["ttft_ms"] for x in m), "ttft_ms"),
              **percentiles((x["tpot_ms"] for x in m if x["tpot_ms"]), "tpot_ms"),
              **percentiles((g for x in m for g in x["itl_ms"]), "itl_ms")}
    receive = [(start + c - s) * 1000 for r, t in pairs for c, s in zip(r.chunk_times_s, t["sent"])]
    first = [(start + r.chunk_times_s[0] - t["sent"][0]) * 1000 for r, t in pairs if r.chunk_times_s]
    delivery = [(t["arrival"] - (start + r.sent_s)) * 1000 for r, t in pairs]
    truth = truth_summary([t for _, t in pairs])
    own = [(x, truth_of(t)) for x, (_, t) in zip(m, pairs)]  # each request against its own truth
    paired = {**percentiles((x["ttft_ms"] - t["ttft_ms"] for x, t in own), "ttft_error_ms"),
              **percentiles((x["tpot_ms"] - t["tpot_ms"] for x, t in own if x["tpot_ms"] and t["tpot_ms"]),
                            "tpot_error_ms")}
    return {"requests": len(pairs), "client": client, "truth": truth,
            "error_ms": {k: _diff(client.get(k), truth.get(k)) for k in client}, "per_request": paired,
            **percentiles(receive, "receive_delay_ms"), "receive_delay_ms_max": round(max(receive), 3) if receive
            else None,
            **percentiles(first, "first_receive_delay_ms"), **percentiles(delivery, "delivery_delay_ms")}


def _diff(a, b):
    return round(a - b, 3) if a is not None and b is not None else None


def stream_point(url: str, streams: int, processes: int = 1, tokens: int = TOKENS, rounds: int = ROUNDS) -> dict:
    """One closed-loop point of `streams` concurrent streams against the paced server (already
    started), from `processes` client processes: stackbook's distortion and the client's cost."""
    paced_log(url)  # forget earlier streams
    target = Target(url, "calibration", {}, {"max_tokens": tokens}, timeout_s=120)
    prompts = [PromptSpec(i, [{"role": "user", "content": f"stream {i}"}], 2) for i in range(streams * rounds)]
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="stackbook-streams-") as tmp:
        recs, cost = send_point(ClosedPlan(streams), target, prompts, ApproximateTokenizer(), processes=processes,
                                parts_dir=Path(tmp) / "parts", writer=None, sent_writer=None,
                                base={"run_id": "selftest", "arm": "calibration", "point": f"streams{streams}",
                                      "concurrency": streams}, warmup=streams)
    out = distortion(recs, paced_log(url), cost.start_s)
    return {"streams": streams, "processes": processes, "true_events_per_s": round(streams * 1000 / TRUTH.gap_ms),
            **out, "errors": sum(not r.ok for r in recs), "client_cpu_fraction": round(cost.busiest_fraction(), 3),
            **cost.worst_loop_delay(), "load_average_1m": [round(load0[0], 2), round(os.getloadavg()[0], 2)]}


def describe_ladder(out: dict) -> str:
    """The stream ladder as a table: stackbook's figure beside the truth's, per point."""
    t, cores = out["truth"], out["cores"]
    lines = [f"truth: TTFT {t['ttft_ms']:g} ms, inter-token gap {t['gap_ms']:g} ms, {out['tokens_per_stream']} tokens "
             f"per stream; server on cores {cores['server']}, client on {cores['client']}"
             + ("" if cores["separate"] else " (shared: this host has one core)"),
             "streams x processes | TTFT p50 / p99 (truth) | TPOT p50 / p99 (truth) | chunk gap p50 / p99 (truth) | "
             "receive delay p50 / p99 | loop delay p99 | client CPU | load"]

    def pair(row, metric):
        c, tr = row["client"], row["truth"]
        return (f"{c[metric + '_p50']:.2f} / {c[metric + '_p99']:.2f} "
                f"({tr[metric + '_p50']:.2f} / {tr[metric + '_p99']:.2f})") if c[metric + "_p50"] is not None else "-"

    for r in out["stream_ladder"]:
        lines.append(f"{r['streams']} x {r['processes']} | {pair(r, 'ttft_ms')} | {pair(r, 'tpot_ms')} | "
                     f"{pair(r, 'itl_ms')} | {r['receive_delay_ms_p50']} / {r['receive_delay_ms_p99']} ms | "
                     f"{r['client_loop_delay_ms_p99']} ms | {r['client_cpu_fraction']:.0%} | "
                     f"{r['load_average_1m'][0]}-{r['load_average_1m'][1]}")
    return "\n".join(lines)
