"""Whether llama-server's step timings (DEBUG_TIMINGS, which the demand map reads) slow it down:
the timed build against a plain build of the same source, interleaved.

Starts each build in turn (`--rounds` times, the order alternating: A B, B A, ...) on the embedded
model's fp32 GGUF with one compute thread and two slots, sends a warm-up request, then
`--requests` completions (a ~40-token prompt, 16 tokens) from two client threads, and reports the
requests per second of each start. The plain build is one made by an earlier stackbook (the cache
folder without `-timed`) or any binary given with --plain. Nothing here is a pass/fail test.

Run: .venv/bin/python benchmarks/llama_timed_build.py --json benchmarks/results/llama_timed_build.json
     (about three minutes on 2 cores)
"""
from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from llama_server_threads import send, serving, write_result
from stackbook.engines.llama_cpp import install_dir
from stackbook.locations import cache_dir


def requests_per_second(server: Path, model: Path, requests: int) -> float:
    with serving(server, model) as (url, _):
        send(url)
        t0 = time.perf_counter()
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda _: send(url), range(requests)))
        return requests / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=24)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--plain", type=Path, help="a llama-server built without DEBUG_TIMINGS")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    timed = install_dir() / "bin" / "llama-server"
    plain = a.plain or Path(str(install_dir()).replace("-timed", "")) / "bin" / "llama-server"
    model = next((cache_dir() / "models").glob("smollm2-135m-instruct/*-fp32.gguf"), None)
    if not timed.exists() or not plain.exists() or model is None:
        raise SystemExit("needs the cached timed llama-server, a plain one (--plain) and the fp32 embedded model")
    rates: dict[str, list[float]] = {"timed": [], "plain": []}
    for r in range(a.rounds):
        for name in (("timed", "plain") if r % 2 == 0 else ("plain", "timed")):
            rates[name].append(round(requests_per_second(timed if name == "timed" else plain, model, a.requests), 4))
    ratio = statistics.median(t / p for t, p in zip(rates["timed"], rates["plain"], strict=True))
    write_result("stackbook-llama-timed-build/1",
                 f"python benchmarks/llama_timed_build.py --requests {a.requests} --rounds {a.rounds}",
                 {"server": {"threads": 1, "parallel": 2, "clients": 2, "weights": model.name},
                  "requests_per_s": rates, "timed_over_plain_median": round(ratio, 4)}, a.json)


if __name__ == "__main__":
    main()
