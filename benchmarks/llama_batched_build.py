"""Whether the set-up's llama-server build (batched by CMake's unity build, scheduled by Ninja:
engines/llama_cpp_build.py) saves time without changing the server: it and the former build (file
by file, by make) of the same source and flags, timed, then served in turn.

Builds the cached sdist's llama-server both ways into a temporary folder (the set-up's flags,
timings compiled in), and records each build's generator and its wall and CPU seconds. Then
starts each binary in turn (`--rounds` times, the order alternating) on the embedded model's GGUF
(fp32, or bf16 where the set-up made that) with one compute thread and two slots, and records the
requests per second of `--requests` completions from two client threads, as
benchmarks/llama_timed_build.py does; and the greedy completions of a few prompts from each, which
must be the same text. Nothing here is a pass/fail test.

Run: .venv/bin/python benchmarks/llama_batched_build.py --json benchmarks/results/llama_batched_build.json
     (about 13 minutes on 2 cores: the two builds most of it)
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

from llama_server_threads import serving, write_result
from llama_timed_build import requests_per_second
from stackbook.engines.install import InstallContext
from stackbook.engines.llama_cpp import LLAMA_CPP_SDIST, LLAMA_CPP_VERSION, LlamaCppAdapter
from stackbook.engines.llama_cpp_build import batched_flags, compile_server, extract_source, fetch_sdist, ninja_flags
from stackbook.model.artifacts import embedded_artifacts

PROMPTS = ("The capital of France is", "Write a haiku about the sea.", "List three prime numbers:")


def timed_build(src: Path, build: Path, flags: list[str], logs: Path) -> dict:
    """Build llama-server into `build`; its wall seconds and the CPU seconds of the compilers."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    failed = compile_server(src, build, flags, logs)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if failed is not None:
        raise SystemExit(f"the {build.name} build failed; see {failed}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1)}


def greedy_texts(server: Path, model: Path) -> list[str]:
    with serving(server, model, parallel=1, context=1024) as (url, _):
        texts = []
        for prompt in PROMPTS:
            body = json.dumps({"prompt": prompt, "max_tokens": 32, "temperature": 0}).encode()
            req = urllib.request.Request(f"{url}/v1/completions", body, {"Content-Type": "application/json"})
            texts.append(json.loads(urllib.request.urlopen(req, timeout=120).read())["choices"][0]["text"])
        return texts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=24)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    model = next((g for g in (embedded_artifacts(p).gguf for p in ("fp32", "bf16")) if g.exists()), None)
    if model is None:
        raise SystemExit("needs the embedded model's fp32 or bf16 GGUF (the set-up makes the one this host "
                         "runs natively): run `make test` first")
    sdist = fetch_sdist(InstallContext.current(), LLAMA_CPP_SDIST)
    flags = list(LlamaCppAdapter.cmake_flags)
    with tempfile.TemporaryDirectory(prefix="llama-batched-") as tmp:
        work = Path(tmp)
        src = extract_source(sdist, work)
        ninja = ninja_flags()
        builds = {"files": {"generator": "make", **timed_build(src, work / "files", flags, work)},
                  "batched": {"generator": "Ninja" if ninja else "make",
                              **timed_build(src, work / "batched", [*ninja, *flags, *batched_flags(work)], work)}}
        binary = {name: work / name / "bin" / "llama-server" for name in builds}
        rates: dict[str, list[float]] = {"batched": [], "files": []}
        for r in range(a.rounds):
            for name in (("batched", "files") if r % 2 == 0 else ("files", "batched")):
                rates[name].append(round(requests_per_second(binary[name], model, a.requests), 4))
        texts = {name: greedy_texts(binary[name], model) for name in binary}
    ratio = statistics.median(b / f for b, f in zip(rates["batched"], rates["files"], strict=True))
    write_result("stackbook-llama-batched-build/1",
                 f"python benchmarks/llama_batched_build.py --requests {a.requests} --rounds {a.rounds}",
                 {"llama_cpp_python": LLAMA_CPP_VERSION, "build": builds,
                  "batched_over_files_wall": round(builds["batched"]["wall_s"] / builds["files"]["wall_s"], 3),
                  "server": {"threads": 1, "parallel": 2, "clients": 2, "weights": model.name},
                  "requests_per_s": rates, "batched_over_files_median": round(ratio, 4),
                  "greedy_texts_same": texts["batched"] == texts["files"], "greedy_texts": texts["batched"]},
                 a.json)


if __name__ == "__main__":
    main()
