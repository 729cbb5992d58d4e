"""The harness's own ceiling on this machine, measured against the calibration server.

A latency the harness cannot resolve, or a rate it cannot hold, must not be reported as an
engine's: this says where those limits lie here.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from stackbook.engines.spec import free_port
from stackbook.harness.pacing import Pacing
from stackbook.harness.stream_fidelity import TOKENS, TRUTH, core_plan, pinned, stream_point
from stackbook.loadgen.arrivals import constant_schedule, poisson_schedule
from stackbook.loadgen.client_processes import send_point
from stackbook.loadgen.drivers import Target, run_closed_loop
from stackbook.loadgen.phases import Phase
from stackbook.loadgen.plans import OpenPlan
from stackbook.loadgen.workload import ApproximateTokenizer, PromptSpec
from stackbook.measure.metric_definitions import achieved_rate_rps, itl_ms, rate_rps, schedule_lag_ms, ttft_ms
from stackbook.measure.validity import MAX_SCHEDULE_LAG_MS, rate_held


LADDER = [25, 50, 100, 200, 400, 800, 1200, 1600, 2400, 3200]  # offered rates, req/s
QUICK_LADDER = [25, 50, 100, 200]


def start_server(pacing: Pacing | None = None, cpu: int | None = None) -> tuple[subprocess.Popen, str]:
    """The calibration server in its own process, so it does not share the client's CPU time;
    paced, and pinned to one core, when asked."""
    port = free_port()
    extra = [] if pacing is None else ["--ttft-ms", str(pacing.ttft_ms), "--gap-ms", str(pacing.gap_ms),
                                       "--jitter", pacing.jitter, "--jitter-ms", str(pacing.jitter_ms)]
    extra += [] if cpu is None else ["--cpu", str(cpu)]
    proc = subprocess.Popen([sys.executable, "-m", "stackbook.harness.calibration_server", "--port", str(port), *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the calibration server did not start")


def _prompts(n: int) -> list[PromptSpec]:
    return [PromptSpec(i, [{"role": "user", "content": "calibrate"}], 1) for i in range(n)]


def _base(point: str, c: int = 0) -> dict:
    return {"run_id": "selftest", "arm": "calibration", "point": point, "concurrency": c}


def measure(url: str, quick: bool = False, rates: list[float] | None = None) -> dict:
    tok = ApproximateTokenizer()
    target = Target(url, "calibration", {"temperature": 0.0}, {"max_tokens": 16}, timeout_s=30)
    floor = run_closed_loop(target, _prompts(30 if quick else 100), tok, concurrency=1, warmup=5, writer=None,
                            base=_base("floor", 1))
    ttft = [ttft_ms(r) for r in floor if r.phase == Phase.MEASURE and r.first_token_s]
    itl = [g for r in floor if r.phase == Phase.MEASURE for g in itl_ms(r)]
    stream_target = Target(url, "calibration", {"temperature": 0.0}, {"max_tokens": 64}, timeout_s=60)
    n = 100 if quick else 400
    t0 = time.perf_counter()
    recs = run_closed_loop(stream_target, _prompts(n), tok, concurrency=32, warmup=0, writer=None,
                           base=_base("events", 32))
    wall = time.perf_counter() - t0
    events = sum(len(r.chunk_times_s) for r in recs)
    held, ladder = rate_ladder(url, rates or (QUICK_LADDER if quick else LADDER), seconds=1.5 if quick else 3.0)
    return {"ttft_floor_ms_p50": round(float(np.percentile(ttft, 50)), 3),
            "ttft_floor_ms_p99": round(float(np.percentile(ttft, 99)), 3),
            "chunk_gap_floor_ms_p50": round(float(np.percentile(itl, 50)), 3) if itl else None,
            "streamed_events_per_s": round(events / wall),
            "max_open_loop_rate_rps": held, "max_schedule_lag_ms": MAX_SCHEDULE_LAG_MS, "rate_ladder": ladder,
            "note": "client and calibration server share this machine's cores"}


# The open-loop schedules a campaign sends (config.arrival_patterns draws its points from the same
# functions), by the arrival kind's name.
LADDER_SCHEDULES = {"poisson": poisson_schedule, "constant": lambda rate, n, seed: constant_schedule(rate, n)}


def ladder_schedule(kind: str, rate: float, n: int, seed: int) -> list[float]:
    """The deadlines of `n` requests at `rate` on the campaign's open-loop schedule of this kind."""
    if kind not in LADDER_SCHEDULES:
        raise ValueError(f"the rate ladder sends an open-loop schedule: arrivals must be one of "
                         f"{sorted(LADDER_SCHEDULES)}, not {kind!r}")
    return LADDER_SCHEDULES[kind](rate, n, seed)


def rate_ladder(url: str, rates: list[float], *, processes: int = 1, arrivals: str = "poisson",
                seconds: float = 3.0) -> tuple[float, list[dict]]:
    """Open-loop rates in turn against the calibration server, each for `seconds` (at least 60
    requests), from `processes` client processes, on the schedule of the `arrivals` pattern kind:
    the highest rate held by the sweep's own rule (p99 schedule lag and achieved rate, see
    measure.validity), with no request failed; the ladder stops at its first rate not held."""
    target = Target(url, "calibration", {"temperature": 0.0}, {"max_tokens": 16}, timeout_s=30)
    ladder_schedule(arrivals, 1.0, 1, 0)  # an unknown kind is refused before any rung is sent
    held, ladder = 0.0, []
    with tempfile.TemporaryDirectory(prefix="stackbook-selftest-") as tmp:
        for rate in rates:
            count = int(max(60, rate * seconds))
            sched = ladder_schedule(arrivals, rate, count, int(rate))
            plan = OpenPlan(sched, cooldown=0)
            recs, cost = send_point(plan, target, _prompts(count), ApproximateTokenizer(), processes=processes,
                                    parts_dir=Path(tmp) / f"rate{rate}", writer=None, sent_writer=None,
                                    base=_base(f"rate{rate}"), warmup=0)
            lags = [schedule_lag_ms(r) for r in recs]
            achieved = achieved_rate_rps(recs)
            p99 = float(np.percentile(lags, 99))
            ok = rate_held(p99, sched_rate(sched), achieved) and all(r.ok for r in recs) and len(recs) == count
            ttft = [ttft_ms(r) for r in recs if r.first_token_s is not None]
            ladder.append({"rate_rps": rate, "processes": processes, "achieved_rps": round(achieved, 1),
                           "lag_p50_ms": round(float(np.percentile(lags, 50)), 3), "lag_p99_ms": round(p99, 3),
                           "ttft_p99_ms": round(float(np.percentile(ttft, 99)), 3) if ttft else None,
                           "errors": sum(not r.ok for r in recs),
                           "client_cpu_fraction": round(cost.busiest_fraction(), 3), "held": ok})
            if not ok:
                break
            held = rate
    return held, ladder


def sched_rate(schedule: list[float]) -> float | None:
    return rate_rps(schedule)


def stop_server(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(10)


def stream_ladder(streams: list[int], processes: int = 1) -> dict:
    """The client's distortion of TTFT, TPOT and chunk gaps at each number of concurrent streams
    against the paced server (harness.stream_fidelity), server and client on separate cores where
    the host has them; with processes > 1, each point again from that many client processes."""
    plan = core_plan()
    proc, url = start_server(TRUTH, cpu=plan["server"][0] if plan["separate"] else None)
    try:
        with pinned(plan["client"] if plan["separate"] else []):
            rows = [stream_point(url, n, p) for n in streams for p in sorted({1, processes})]
    finally:
        stop_server(proc)
    return {"truth": TRUTH.model_dump(), "tokens_per_stream": TOKENS, "cores": plan, "stream_ladder": rows}


def selftest(quick: bool = False, processes: int = 1, streams: list[int] | None = None) -> dict:
    """The harness's ceiling; with processes > 1, the open-loop ladder again from that many
    client processes, beside the one-process ladder; with `streams`, the stream fidelity ladder."""
    if streams:
        return stream_ladder(streams, processes)
    proc, url = start_server()
    try:
        out = measure(url, quick=quick)
        if processes > 1:
            held, ladder = rate_ladder(url, QUICK_LADDER if quick else LADDER, processes=processes,
                                       seconds=1.5 if quick else 3.0)
            out |= {"processes": processes, "max_open_loop_rate_rps_processes": held,
                    "rate_ladder_processes": ladder}
        return out
    finally:
        stop_server(proc)
