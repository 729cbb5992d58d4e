"""Which precision each CPU engine kind serves the embedded model fastest in, on this host.

Each kind is launched as a campaign launches it (its adapter, the quickstart's engine settings),
once per precision, on the embedded SmolLM2-135M-Instruct in that precision (the one bf16
checkpoint, cast at load or converted to a GGUF of that precision). Each launch gets one warm-up
request and then N requests one at a time (concurrency 1): a 128-token prompt, a 16-token reply
forced to its length, greedy, its prefix cache off (a new random prompt each time). Per request:
TTFT (send to the first token) and decode tokens/s (the tokens after the first over the time
after it). Rounds repeat the whole grid in alternating order, since other work may share the CPU.

Run: .venv/bin/python benchmarks/native_precision.py [--kinds llama_cpp vllm_cpu] [--precisions bf16 fp32 fp16]
     [--requests 4] [--rounds 2]   (about 10 minutes on a 2-core host; the embedded model's GGUFs in each
     precision must be set up: stackbook setup-model --precision fp32 --precision fp16)
Writes benchmarks/results/native_precision.json. Nothing here is a pass/fail test.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from stackbook.config.protocol import Protocol
from stackbook.engines.registry import adapter_class
from stackbook.host import FLOAT_FORMAT_FLAGS, cpu_model, isa_flags, native_because
from stackbook.loadgen.workload import client_tokenizer, text_of_tokens
from stackbook.locations import REPO_ROOT
from stackbook.model.artifacts import EMBEDDED_NAME, embedded_artifacts

RESULTS = REPO_ROOT / "benchmarks" / "results" / "native_precision.json"

# The quickstart's engine settings for each kind (campaigns/quickstart.yaml).
ENGINES = {
    "llama_cpp": {"kind": "llama_cpp", "threads": 1, "parallel": 4},
    "vllm_cpu": {"kind": "vllm_cpu", "kv_cache_gib": 1, "enforce_eager": True, "max_num_seqs": 4},
    "transformers": {"kind": "transformers"},
    "mlx": {"kind": "mlx"},
}


def one_request(client: httpx.Client, adapter, prompt: str, output_tokens: int) -> dict:
    """One streamed chat request: TTFT, decode tokens/s, and the tokens the engine reports."""
    body = {"model": adapter.served_name, "messages": [{"role": "user", "content": prompt}], "stream": True,
            "stream_options": {"include_usage": True},
            **adapter.sampling_fields(Protocol().decoding.resolved()), **adapter.output_length_fields(output_tokens),
            **adapter.prefix_cache_fields("cold")}
    sent = time.perf_counter()
    first = last = None
    tokens = None
    with client.stream("POST", adapter.base_url + "/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if event.get("usage"):
                tokens = event["usage"].get("completion_tokens")
            if any((c.get("delta") or {}).get("content") for c in event.get("choices") or []):
                now = time.perf_counter()
                first = first or now
                last = now
    n = tokens or output_tokens
    return {"ttft_ms": (first - sent) * 1000, "output_tokens": n,
            "decode_tok_s": (n - 1) / (last - first) if last and last > first else None}


# mlx_lm's server has no dtype flag: it serves the checkpoint's own, so it gets a cast copy.
CAST = """
import json, shutil, sys, torch
from pathlib import Path
from safetensors.torch import load_file, save_file
src, dst, dtype = Path(sys.argv[1]), Path(sys.argv[2]), getattr(torch, sys.argv[3])
shutil.copytree(src, dst, ignore=shutil.ignore_patterns("model.safetensors"))
save_file({k: v.to(dtype) for k, v in load_file(src / "model.safetensors").items()}, dst / "model.safetensors",
          metadata={"format": "pt"})
cfg = json.loads((dst / "config.json").read_text())
cfg["torch_dtype"] = cfg["dtype"] = sys.argv[3]
(dst / "config.json").write_text(json.dumps(cfg))
"""
TORCH_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def artifacts(kind: str, precision: str, work: Path):
    """The embedded model in `precision`; for a kind that serves its checkpoint's own dtype, the
    one bf16 checkpoint cast to it (the same values in fp32)."""
    from dataclasses import replace

    from stackbook.engines.vllm_cpu import VllmCpuAdapter

    art = embedded_artifacts(precision)
    if kind != "mlx" or precision == "bf16":
        return art
    cast = work / f"hf-{precision}"
    if not cast.exists():
        subprocess.run([str(VllmCpuAdapter.installed_executable()), "-c", CAST, str(art.hf_dir), str(cast),
                        TORCH_NAMES[precision]], check=True)
    return replace(art, hf_dir=cast)


def measure(kind: str, precision: str, prompts: list[str], output_tokens: int, log_dir: Path) -> dict:
    """Start the kind in `precision`, send the prompts one at a time (the first a warm-up), stop it."""
    cls = adapter_class(kind)
    spec = cls.spec_model.model_validate(ENGINES[kind])
    protocol = Protocol(precision={"weights": precision, "kv_cache": precision}, context_length=2048)
    adapter = cls(spec, artifacts(kind, precision, log_dir), protocol, EMBEDDED_NAME,
                  log_dir / f"{kind}-{precision}.log")
    began = time.perf_counter()
    adapter.start()
    try:
        ready_s = adapter.wait_ready()
        with httpx.Client(timeout=300) as client:
            one_request(client, adapter, prompts[0], output_tokens)
            reqs = [one_request(client, adapter, p, output_tokens) for p in prompts[1:]]
    finally:
        adapter.stop()
    ttft = [r["ttft_ms"] for r in reqs]
    decode = [r["decode_tok_s"] for r in reqs if r["decode_tok_s"]]
    return {"kind": kind, "precision": precision, "ready_s": round(ready_s, 1),
            "ttft_ms_median": round(statistics.median(ttft), 1),
            "decode_tok_s_median": round(statistics.median(decode), 2),
            "ttft_ms": [round(x, 1) for x in ttft], "decode_tok_s": [round(x, 2) for x in decode],
            "seconds": round(time.perf_counter() - began, 1)}


def summarize(runs: list[dict], kinds: list[str], precisions: list[str], flags: list[str], output_tokens: int) -> dict:
    """Per kind and precision, each round's medians and one request's time at this shape (TTFT,
    then the other tokens at the decode rate), whether the kind runs it natively here, and the
    precision whose slowest round was fastest."""
    summary = {}
    for kind in kinds:
        rows = {p: [r for r in runs if r["kind"] == kind and r["precision"] == p] for p in precisions}
        summary[kind] = {p: {"ttft_ms_median_per_round": [r["ttft_ms_median"] for r in rs],
                             "decode_tok_s_median_per_round": [r["decode_tok_s_median"] for r in rs],
                             "request_s_per_round": [round(r["ttft_ms_median"] / 1000 + (output_tokens - 1)
                                                           / r["decode_tok_s_median"], 2) for r in rs],
                             "native_on_this_host": native_because(adapter_class(kind).native_precisions.get(p, ("-",)),
                                                                   flags)}
                         for p, rs in rows.items() if rs}
        done = [p for p in precisions if rows[p]]
        summary[kind]["fastest_request"] = min(done, key=lambda p: max(summary[kind][p]["request_s_per_round"]))
        summary[kind]["fastest_ttft"] = min(done, key=lambda p: max(summary[kind][p]["ttft_ms_median_per_round"]))
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kinds", nargs="+", default=["llama_cpp", "vllm_cpu"], choices=sorted(ENGINES))
    ap.add_argument("--precisions", nargs="+", default=["bf16", "fp32", "fp16"])
    ap.add_argument("--requests", type=int, default=4, help="measured requests per launch (after one warm-up)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--output-tokens", type=int, default=16)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()

    tokenizer = client_tokenizer(str(embedded_artifacts().hf_dir))
    rng = random.Random(0)
    grid = [(k, p) for k in args.kinds for p in args.precisions]
    runs = []
    with tempfile.TemporaryDirectory() as logs:
        for rnd in range(args.rounds):
            for kind, precision in (grid if rnd % 2 == 0 else grid[::-1]):
                prompts = [text_of_tokens(tokenizer, args.prompt_tokens, rng) for _ in range(args.requests + 1)]
                row = {"round": rnd, **measure(kind, precision, prompts, args.output_tokens, Path(logs))}
                print(json.dumps(row), file=sys.stderr)
                runs.append(row)
    flags = isa_flags()
    summary = summarize(runs, args.kinds, args.precisions, flags, args.output_tokens)
    out = {"command": "benchmarks/native_precision.py " + " ".join(sys.argv[1:]),
           "host": {"cpu": cpu_model(), "logical_cpus": os.cpu_count(), "isa_flags": flags,
                    "float_formats_native": {p: native_because(n, flags) for p, n in FLOAT_FORMAT_FLAGS.items()}},
           "workload": {"prompt_tokens": args.prompt_tokens, "output_tokens": args.output_tokens,
                        "requests_per_launch": args.requests, "warmup_requests": 1, "concurrency": 1,
                        "engines": {k: ENGINES[k] for k in args.kinds}},
           "recorded_unix": round(time.time()), "summary": summary, "runs": runs}
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
