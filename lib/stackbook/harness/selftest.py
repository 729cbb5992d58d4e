"""The harness's own ceiling on this machine, measured against the calibration server.

A latency the harness cannot resolve, or a rate it cannot hold, must not be reported as an
engine's: this says where those limits lie here.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import numpy as np

from stackbook.engines.spec import free_port
from stackbook.loadgen.arrivals import poisson_schedule
from stackbook.loadgen.drivers import Target, run_closed_loop, run_open_loop
from stackbook.loadgen.workload import ApproximateTokenizer, PromptSpec
from stackbook.measure.validity import MAX_SCHEDULE_LAG_MS, rate_held


def start_server() -> tuple[subprocess.Popen, str]:
    """The calibration server in its own process, so it does not share the client's CPU time."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "stackbook.harness.calibration_server", "--port", str(port)],
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
    ttft = [(r.first_token_s - r.sent_s) * 1000 for r in floor if r.phase == "measure" and r.first_token_s]
    itl = [g * 1000 for r in floor if r.phase == "measure" for g in np.diff(r.chunk_times_s)]
    stream_target = Target(url, "calibration", {"temperature": 0.0}, {"max_tokens": 64}, timeout_s=60)
    n = 100 if quick else 400
    t0 = time.perf_counter()
    recs = run_closed_loop(stream_target, _prompts(n), tok, concurrency=32, warmup=0, writer=None,
                           base=_base("events", 32))
    wall = time.perf_counter() - t0
    events = sum(len(r.chunk_times_s) for r in recs)
    held, ladder = 0.0, []
    for rate in rates or ([25, 50, 100, 200] if quick else [25, 50, 100, 200, 400, 800, 1200, 1600, 2400, 3200]):
        count = int(max(60, rate * (1.5 if quick else 3)))
        sched = poisson_schedule(rate, count, seed=int(rate))
        recs = run_open_loop(target, _prompts(count), tok, schedule=sched, warmup=0, writer=None, base=_base(f"rate{rate}"))
        lags = [(r.sent_s - r.scheduled_s) * 1000 for r in recs]
        sends = sorted(r.sent_s for r in recs)
        achieved = (len(sends) - 1) / (sends[-1] - sends[0])
        p99 = float(np.percentile(lags, 99))
        ok = rate_held(p99, sched_rate(sched), achieved) and all(r.ok for r in recs)
        ladder.append({"rate_rps": rate, "achieved_rps": round(achieved, 1), "lag_p50_ms": round(float(np.percentile(lags, 50)), 3),
                       "lag_p99_ms": round(p99, 3), "errors": sum(not r.ok for r in recs), "held": ok})
        if not ok:
            break
        held = rate
    return {"ttft_floor_ms_p50": round(float(np.percentile(ttft, 50)), 3),
            "ttft_floor_ms_p99": round(float(np.percentile(ttft, 99)), 3),
            "chunk_gap_floor_ms_p50": round(float(np.percentile(itl, 50)), 3) if itl else None,
            "streamed_events_per_s": round(events / wall),
            "max_open_loop_rate_rps": held, "max_schedule_lag_ms": MAX_SCHEDULE_LAG_MS, "rate_ladder": ladder,
            "note": "client and calibration server share this machine's cores"}


def sched_rate(schedule: list[float]) -> float:
    return (len(schedule) - 1) / (schedule[-1] - schedule[0])


def selftest(quick: bool = False) -> dict:
    proc, url = start_server()
    try:
        return measure(url, quick=quick)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
