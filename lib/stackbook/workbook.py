"""The steps the arm notebooks call: each computes with the pure modules, writes the arm's
side file, and returns tables for the notebook to show."""
from __future__ import annotations

import pandas as pd

from . import sizing
from .canaries import load_suite, run_suite, verdict
from .models import geometry_for
from .passport import write_passport
from .records import read_records
from .metrics import requests_frame
from .store import read_json, update_results
from .sweep import run_sweep

VLLM_CPU_BLOCK_TOKENS = 128  # vLLM's CPU backend allocates KV in blocks of 128 tokens


def model_geometry(session):
    art = session.adapter.artifacts
    if art is None:
        return None
    if art.gguf and art.gguf.exists():
        return geometry_for(art.gguf)
    return geometry_for(art.hf_dir)


def arm_sizing(session) -> dict:
    """Weights, KV per token, the pool the arm is configured with, and the sequences it holds,
    predicted by arithmetic and set beside what the engine itself reported."""
    g = model_geometry(session)
    p = session.protocol
    if g is None:
        out = {"note": "a managed endpoint: nothing to size locally"}
        update_results(session.arm_dir, "sizing", out)
        return out
    w = sizing.weight_bytes(g.num_parameters, p.precision.weights)
    kv = sizing.kv_bytes_per_token(g.kv_layers, g.num_kv_heads, g.head_dim, p.precision.kv_cache)
    spec = session.adapter.spec
    predicted: dict = {}
    if spec.kind == "llama_cpp":
        tokens = p.context_length * spec.parallel
        predicted = {"kv_tokens": tokens, "kv_cache_mib": tokens * kv / 2**20,
                     "max_concurrency": spec.parallel,
                     "rule": "-c = context x slots; one KV stream of `context` cells per slot"}
    elif spec.kind == "vllm_cpu":
        pool = spec.kv_cache_gib * sizing.GiB
        tokens = sizing.kv_tokens_in_pool(pool, kv, VLLM_CPU_BLOCK_TOKENS)
        predicted = {"kv_tokens": tokens, "pool_bytes": pool, "max_concurrency": round(tokens / p.context_length, 2),
                     "live_sequences": sizing.max_live_sequences(pool, p.context_length, kv),
                     "rule": f"VLLM_CPU_KVCACHE_SPACE GiB / KV per token, in blocks of {VLLM_CPU_BLOCK_TOKENS}"}
    realized = (session.engine or {}).get("realized_capacity", {})
    cpu = sizing.this_cpu()
    out = {
        "geometry": {"name": g.name, "architecture": g.architecture, "parameters": g.num_parameters,
                     "layers": g.num_layers, "kv_layers": g.kv_layers, "kv_heads": g.num_kv_heads,
                     "head_dim": g.head_dim, "trained_context": g.max_context},
        "weights_bytes": w, "kv_bytes_per_token": kv,
        "kv_bytes_per_sequence": kv * p.context_length,
        "predicted_capacity": predicted,
        "realized_capacity": realized,
        "memory": {"host_memory_bytes": cpu.memory_bytes, "fits": w + predicted.get("kv_tokens", 0) * kv < cpu.memory_bytes},
        "roofline": {"bandwidth_bytes_s": cpu.bandwidth, "source": cpu.source,
                     "decode_tok_s_bound": sizing.roofline_decode_tok_s(cpu.bandwidth, w, p.context_length // 2, kv)},
    }
    update_results(session.arm_dir, "sizing", out)
    return out


def capacity_table(s: dict) -> pd.DataFrame:
    pred, real = s["predicted_capacity"], s["realized_capacity"]
    rows = []
    for key in ("kv_tokens", "max_concurrency"):
        pv, rv = pred.get(key), real.get(key)
        rows.append({"quantity": key, "predicted": pv, "realized (engine)": rv,
                     "realized / predicted": (rv / pv) if pv and rv else None})
    return pd.DataFrame(rows)


def arm_canaries(session, progress: bool = True) -> tuple[dict, pd.DataFrame]:
    from tqdm.auto import tqdm

    suite, digest = load_suite(session.protocol.canaries.suite)
    bar = tqdm(total=len(suite.checks), desc="canaries", disable=not progress)
    results = run_suite(session.target(), suite, session.adapter.kind, progress=bar)
    bar.close()
    v = verdict(results)
    out = {**v, "suite": suite.suite, "suite_version": suite.version, "suite_sha256": digest, "results": results}
    update_results(session.arm_dir, "canaries", out)
    table = pd.DataFrame([{"check": r["id"], "kind": r["kind"],
                           "result": ("PASS" if r["passed"] else "FAIL") + (" (expected failure)" if r["expected_failure"] else ""),
                           "output": (r.get("output") or "")[:80], "detail": r.get("detail")} for r in results])
    return out, table


def arm_sweep(session, run_id: str | None = None, progress: bool = True) -> dict:
    canaries = (read_json(session.arm_dir / "results.json", {}) or {}).get("canaries")
    label = "accepted" if canaries and canaries.get("verdict") == "PASS" else "HOLD"
    out = run_sweep(session, run_id or session.run_dir.name, progress=progress)
    out["label"] = label
    update_results(session.arm_dir, "sweep", out)
    write_passport(session.campaign, session.arm, session.arm_dir)
    return out


def points_table(sweep: dict) -> pd.DataFrame:
    cols = ["concurrency", "repetition", "completed", "requests", "ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50",
            "tpot_ms_p99", "itl_ms_p50", "e2e_ms_p50", "e2e_ms_p95", "e2e_ms_p99", "output_throughput_tok_s",
            "goodput_rps", "slo_attainment", "littles_law_concurrency"]
    df = pd.DataFrame.from_dict(sweep["points"], orient="index")
    return df[[c for c in cols if c in df.columns]].round(2)


def arm_requests(session) -> pd.DataFrame:
    return requests_frame(read_records(session.arm_dir / "requests.jsonl"))
