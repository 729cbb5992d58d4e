"""A measurement on the real knee server: each configuration is its own calibration-server
process in knee mode (127.0.0.1, a free port), driven by the load generator's closed loop; the
point is read from the client's own records, as any engine's would be."""
from __future__ import annotations

import random
import socket
import subprocess
import sys
import time
from contextlib import contextmanager

import httpx

from stackbook.loadgen.drivers import Target, run_closed_loop
from stackbook.loadgen.phases import Phase
from stackbook.loadgen.workload import ApproximateTokenizer, PromptSpec
from stackbook.search.knee import KneeLoad, knee_of
from stackbook.engines.knobs import Value
from stackbook.search.step import Point, point_from_records

ADMIT_WINDOW_MS = 2.0  # the server's admission window (Knee.parse's default)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def knee_server(config: dict[str, Value], ready_s: float = 30.0):
    """A knee-mode calibration server for this configuration, stopped on leaving."""
    k = knee_of(config, ADMIT_WINDOW_MS)
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "stackbook.harness.calibration_server", "--host", "127.0.0.1",
                             "--port", str(port), "--knee", f"{k.max_batch},{k.t0_ms:g},{k.t1_ms:g}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the knee server exited ({proc.returncode}): {proc.stderr.read().decode()[-500:]}")
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the knee server on port {port} was not ready within {ready_s:.0f} s")
            time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def measure_on_server(config: dict[str, Value], load: KneeLoad, seed: int) -> Point:
    """One point: one warm-up and one cool-down request per client around `requests` measured."""
    c = load.concurrency
    n = load.requests + 2 * c
    rng = random.Random(seed)
    lengths = load.lengths
    prompts = [PromptSpec(i, [{"role": "user", "content": f"search {seed} r{i}"}], 2, lengths.draw(rng))
               for i in range(n)]
    began = time.perf_counter()
    with knee_server(config) as url:
        target = Target(url, "calibration", {}, {"max_tokens": load.output_tokens}, timeout_s=60,
                        length_for=lambda tokens: {"max_tokens": tokens})
        recs = run_closed_loop(target, prompts, ApproximateTokenizer(), concurrency=c, warmup=c, cooldown=c,
                               writer=None, base={"run_id": "search", "arm": "knee", "point": "p", "concurrency": c})
    measured = [r for r in recs if r.phase == Phase.MEASURE]
    slo = load.slo
    point = point_from_records(measured, slo.ttft_s, slo.tpot_s)
    return point.model_copy(update={"duration_s": time.perf_counter() - began})
