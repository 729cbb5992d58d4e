"""llama-server's CPU time per request, its HTTP threads apart from its main loop and compute.

Starts the cached llama-server (the build `make test` set up) on the embedded model's fp32 GGUF,
one compute thread and two slots, sends a warm-up request, then for each concurrency N sends
`--requests` completions (a ~40-token prompt, 16 tokens) from N threads of this process, reading
the server's processes before and after with `measure.runtime.read_processes` under the llama.cpp
kind's own process roles: the HTTP threads (born before the model loads) land under
`llama_server.http`, the rest of the process under `llama_server`. Each thread's birth after the
process is reported too, the fact the split rests on, and each thread's run time after the points.
Measured on a 2-core AVX2 EPYC: the threads born within 10 ms of the process are cpp-httplib's
pool and listener, the log writer and the stream-session collector (host execution, all of them);
one more thread is born after the model loads (about 0.4 s) and runs about as much per request as
that whole group (0.8 ms). `gdb -p PID -batch -ex "thread apply all bt"` names it:
`server_queue::worker_loop`, the task queue's worker that takes new tasks while the main loop
decodes, so runtime work; the birth rule counts it with the main loop and the kernels, where the
rest of the runtime sits. Nothing here is a pass/fail test.

Run: .venv/bin/python benchmarks/llama_server_threads.py --json benchmarks/results/llama_server_threads.json
     (under a minute on 2 cores)
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from stackbook.engines import adapter_class
from stackbook.engines.llama_cpp import install_dir
from stackbook.host import cpu_model, isa_flags
from stackbook.locations import cache_dir
from stackbook.measure.runtime import process_window, read_processes
from stackbook.measure.threads import thread_times

PROMPT = "Tell me a story about a cat and a dog who " * 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def send(url: str) -> None:
    body = json.dumps({"prompt": PROMPT, "max_tokens": 16}).encode()
    req = urllib.request.Request(f"{url}/v1/completions", body, {"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=120).read()


def wait_ready(url: str, proc: subprocess.Popen) -> None:
    for _ in range(200):
        if proc.poll() is not None:
            raise SystemExit(f"llama-server exited with {proc.returncode} before it was ready")
        try:
            urllib.request.urlopen(f"{url}/health", timeout=1)
            return
        except OSError:
            time.sleep(0.25)
    raise SystemExit("llama-server did not become ready in 50 s")


@contextmanager
def serving(server: Path, model: Path, parallel: int = 2,
            context: int = 2048) -> Iterator[tuple[str, subprocess.Popen]]:
    """llama-server on `model` with one compute thread and `parallel` slots, ready: its URL and process,
    killed on leaving."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([str(server), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
                             "--threads", "1", "--parallel", str(parallel), "-c", str(context)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_ready(url, proc)
        yield url, proc
    finally:
        proc.kill()
        proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    server = install_dir() / "bin" / "llama-server"
    model = next((cache_dir() / "models").glob("smollm2-135m-instruct/*-fp32.gguf"), None)
    if not server.exists() or model is None:
        raise SystemExit("no cached llama-server or fp32 embedded model: run `make test` (or tools/bootstrap.sh) first")
    roles = adapter_class("llama_cpp").process_roles
    with serving(server, model) as (url, proc):
        send(url)
        births = sorted(round(t.born_after_s, 2) for t in thread_times(proc.pid) or [])
        points = []
        for n in a.concurrency:
            before, t0 = read_processes(proc.pid, roles), time.perf_counter()
            with ThreadPoolExecutor(n) as pool:
                list(pool.map(lambda _: send(url), range(a.requests)))
            after, wall = read_processes(proc.pid, roles), time.perf_counter() - t0
            cpu = process_window(before, after)["cpu_seconds"]["engine"]
            points.append({"concurrency": n, "requests": a.requests, "wall_s": round(wall, 2),
                           "cpu_s": {k: round(v, 4) for k, v in cpu.items()},
                           "ms_per_request": {k: round(1000 * v / a.requests, 3) for k, v in cpu.items()}})
        threads = [{"born_after_s": round(t.born_after_s, 2), "run_s": round(t.run_s, 4), "main": t.tid == proc.pid}
                   for t in sorted(thread_times(proc.pid) or [], key=lambda t: t.born_after_s)]
    write_result("stackbook-llama-server-threads/1", "python benchmarks/llama_server_threads.py " + " ".join(
        ["--requests", str(a.requests), "--concurrency", *map(str, a.concurrency)]),
        {"server": {"threads": 1, "parallel": 2, "weights": model.name,
                    "http_threads_born_within_s": roles[0].http_threads_born_within_s},
         "thread_births_s": births, "points": points, "threads_after": threads}, a.json)


def write_result(fmt: str, command: str, body: dict, path: Path | None) -> None:
    """One benchmark's JSON: its format, command, date and host first, printed and written to path."""
    out = {"format": fmt, "command": command,
           "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "host": {"cpu_model": cpu_model(), "isa_flags": isa_flags(), "cpus": os.cpu_count(),
                    "python": platform.python_version()}, **body}
    text = json.dumps(out, indent=1)
    print(text)
    if path:
        path.write_text(text + "\n")


if __name__ == "__main__":
    main()
