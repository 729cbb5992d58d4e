"""The steps the arm notebooks call: each computes with the pure modules, writes the arm's
side file, and returns tables for the notebook to show."""
from __future__ import annotations

import pandas as pd

from . import sizing
from .canaries import load_suite, run_suite, verdict
from .models import geometry_for
from .passport import write_passport
from .lengths import describe_length
from .metrics import peer_definitions, requests_frame
from .records import read_records
from .store import read_json, update_results
from .sweep import run_sweep

VLLM_CPU_BLOCK_TOKENS = 128  # vLLM's CPU backend allocates KV in blocks of 128 tokens


def model_geometry(session):
    """The geometry of the campaign's model: from the catalog, or read from the served artifact."""
    spec = session.campaign.model
    if spec.source == "catalog":
        return geometry_for(spec.catalog)
    art = session.adapter.artifacts
    if art is None:
        return None
    if art.hf_dir and (art.hf_dir / "config.json").exists():
        g = geometry_for(art.hf_dir)
        if g.num_parameters is None and art.gguf and art.gguf.exists():
            g = geometry_for(art.gguf)
        return g
    return geometry_for(art.gguf)


def predicted_capacity(g, session, pool_bytes: float | None) -> dict:
    """The engine's own allocation rule applied to the arithmetic: what it should report."""
    spec, p = session.adapter.spec, session.protocol
    prec = p.precision
    state = prec.state if prec.state != "none" else None
    if spec.kind == "llama_cpp":
        tokens = p.context_length * spec.parallel
        return {"kv_tokens": tokens, "kv_cache_mib": tokens * sizing.model_kv_bytes_per_token(g, prec.kv_cache) / 2**20,
                "max_concurrency": spec.parallel,
                "rule": "-c = context x slots; one KV stream of `context` cells per slot"}
    if spec.kind == "vllm_cpu":
        acc = sizing.vllm_kv_accounting(g, spec.kv_cache_gib * sizing.GiB, p.context_length, prec.kv_cache,
                                        state or "fp32", block_size=VLLM_CPU_BLOCK_TOKENS)
        return {"kv_tokens": acc["kv_cache_size_tokens"], "max_concurrency": acc["max_concurrency"],
                "num_blocks": acc["num_blocks"],
                "rule": f"VLLM_CPU_KVCACHE_SPACE GiB / page bytes / layers, {VLLM_CPU_BLOCK_TOKENS}-token blocks"}
    if spec.kind == "vllm":
        hw = sizing.accelerator(session.campaign.hardware.accelerator)
        available = pool_bytes if pool_bytes is not None else (
            hw.memory_bytes * spec.gpu_memory_utilization
            - sizing.weight_bytes(g.num_parameters, prec.weights, session.campaign.model.artifact_bytes)
            - session.campaign.hardware.activations_gib * sizing.GiB)
        acc = sizing.vllm_kv_accounting(g, available, p.context_length, prec.kv_cache, state or "fp32")
        return {"kv_tokens": acc["kv_cache_size_tokens"], "max_concurrency": acc["max_concurrency"], **acc,
                "rule": "vLLM V1 block accounting (hybrid attention blocks inflated to the state page size)"}
    if spec.kind == "sglang":
        acc = sizing.sglang_kv_accounting(g, pool_bytes, p.context_length, prec.kv_cache, state or "fp32",
                                          spec.mamba_full_memory_ratio,
                                          "disabled" if spec.disable_radix_cache else spec.mamba_scheduler_strategy)
        return {"kv_tokens": acc["max_total_num_tokens"], "max_concurrency": acc["max_concurrency"], **acc,
                "rule": "SGLang: state slots = pool x r/(1+r) / state; KV gets the rest; requests <= slots // S"}
    return {"rule": "a managed endpoint discloses no capacity"}


def arm_sizing(session) -> dict:
    """Weights, KV per token, recurrent state, the cache pool and the sequences it holds,
    predicted by arithmetic and set beside what the engine itself reported."""
    g = model_geometry(session)
    p = session.protocol
    if g is None:
        out = {"note": "a managed endpoint: nothing to size locally"}
        update_results(session.arm_dir, "sizing", out)
        return out
    hw_spec = session.campaign.hardware
    hw = sizing.accelerator(hw_spec.accelerator)
    prec = p.precision
    state = prec.state if prec.state != "none" else None
    spec = session.adapter.spec
    pool = hw_spec.pool_gib * sizing.GiB if hw_spec.pool_gib else None
    if spec.kind == "vllm_cpu":
        pool = spec.kv_cache_gib * sizing.GiB
    budget = sizing.size_model(
        g, memory_bytes=hw.usable_bytes or hw.memory_bytes, context_tokens=p.context_length,
        weights_precision=prec.weights, kv_precision=prec.kv_cache, state_precision=state,
        artifact_bytes=session.campaign.model.artifact_bytes, pool_bytes=pool,
        workspace_bytes=hw_spec.workspace_gib * sizing.GiB, activations_bytes=hw_spec.activations_gib * sizing.GiB,
        bandwidth=hw.bandwidth or None)
    predicted = predicted_capacity(g, session, budget["cache_pool_bytes"] if pool is not None else pool)
    out = {
        "geometry": {"name": g.name, "architecture": g.architecture, "parameters": g.num_parameters,
                     "layers": g.num_layers, "full_attention_layers": g.kv_layers,
                     "sliding_window_layers": g.sliding_layers, "linear_attention_layers": g.linear_layers,
                     "kv_heads": g.num_kv_heads, "head_dim": g.head_dim, "mla": g.is_mla,
                     "experts": g.num_experts, "trained_context": g.max_context, "source": g.source},
        "hardware": {"name": hw.name, "memory_bytes": hw.memory_bytes, "bandwidth_bytes_s": hw.bandwidth,
                     "source": hw.source},
        **budget,
        "kv_bytes_per_sequence": sizing.model_kv_bytes_per_sequence(g, p.context_length, prec.kv_cache),
        "predicted_capacity": predicted,
        "realized_capacity": (session.engine or {}).get("realized_capacity", {}),
        "assumptions_table": sizing.assumption_table(g, budget["cache_pool_bytes"], p.context_length),
    }
    update_results(session.arm_dir, "sizing", out)
    return out


def budget_table(s: dict) -> pd.DataFrame:
    """The budget in both units (GB = 1e9, GiB = 2**30), with how each line was obtained."""
    GiB = sizing.GiB
    rows = [
        ("device memory", s["memory_bytes"], s["hardware"]["name"]),
        ("weights", s["weights_bytes"], f"{s['geometry']['parameters'] or 0:,} parameters, {s['weights_precision']}"),
        ("KV per token", s["kv_bytes_per_token"], f"{s['geometry']['full_attention_layers']} full-attention layers, {s['kv_precision']}"),
        ("recurrent state per sequence", s["state_bytes_per_sequence"],
         f"{s['geometry']['linear_attention_layers']} linear-attention layers, {s['state_precision']}"),
        (f"one sequence at {s['context']:,} tokens", s["bytes_per_sequence"], "context x KV per token + state"),
        ("cache pool", s["cache_pool_bytes"], s["cache_pool_source"]),
    ]
    df = pd.DataFrame([{"quantity": q, "bytes": f"{b:,.0f}", "GB": f"{b / 1e9:,.3f}", "GiB": f"{b / GiB:,.3f}",
                        "how": h} for q, b, h in rows]).set_index("quantity")
    df.loc["live sequences"] = [f"{s['max_live_sequences']:,}", "", "", "floor(pool / one sequence)"]
    return df


def weights_table(session, s: dict) -> pd.DataFrame:
    from .models import model_catalog
    spec = session.campaign.model
    artifacts = model_catalog().get(spec.catalog, {}).get("artifacts") if spec.source == "catalog" else None
    rows = sizing.weights_by_precision(s["geometry"]["parameters"], artifacts)
    return pd.DataFrame(rows).set_index("precision")


def engine_accounting(s: dict) -> pd.DataFrame:
    return pd.Series({k: v for k, v in s["predicted_capacity"].items() if k != "rule"}, dtype=object).to_frame(
        "engine accounting")


def capacity_table(s: dict) -> pd.DataFrame:
    pred, real = s["predicted_capacity"], s["realized_capacity"]
    rows = []
    for key in ("kv_tokens", "max_concurrency"):
        pv, rv = pred.get(key), real.get(key)
        rows.append({"quantity": key, "predicted": pv, "realized (engine)": rv,
                     "realized / predicted": (rv / pv) if pv and rv else None})
    return pd.DataFrame(rows)


def arm_canaries(session, progress: bool = True) -> tuple[dict, pd.DataFrame]:
    from tqdm import tqdm

    suite, digest = load_suite(session.protocol.canaries.suite)
    bar = tqdm(total=len(suite.checks), desc="canaries", disable=not progress)
    from .sweep import tokenizer_for
    tokenizer = tokenizer_for(session)
    results = run_suite(session.target(), suite, session.adapter.kind, progress=bar, tokenizer=tokenizer,
                        context_length=session.protocol.context_length)
    bar.close()
    v = verdict(results)
    from .probe import probe_endpoint
    probe = probe_endpoint(session.adapter, session.target(), tokenizer,
                           (session.engine or {}).get("realized_capacity"))
    out = {**v, "suite": suite.suite, "suite_version": suite.version, "suite_sha256": digest, "results": results,
           "probe": probe}
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


def workload_table(session) -> pd.DataFrame:
    """The workload and load shape every request of this arm followed, in words."""
    p = session.protocol
    w = p.workload
    rows = {
        "prompt tokens (user content per request or turn)": describe_length(w.prompt_tokens),
        "output tokens": describe_length(w.output_tokens),
        "shared prefix": (f"{w.shared_prefix.groups} group(s) of {w.shared_prefix.tokens} tokens"
                          if w.shared_prefix else "none: prompts share only the chat template"),
        "conversation": f"{w.conversation.turns} turns, full history each turn" if w.conversation else "single turn",
        "reply format": ("JSON under a fixed schema, checked per request" if w.response_format == "json_schema"
                         else "free text, length forced where the engine allows"),
        "system prompt": w.system_prompt or "none",
        "arrival": p.arrival.model_dump(),
        "prefix cache": {"cold": "flushed before every point", "warm": "flushed, then primed, before every point"}[
            p.prefix_cache],
        "decoding": p.decoding.resolved() | {"preset": p.decoding.preset},
    }
    return pd.Series(rows, dtype=object).to_frame("protocol")


def prefix_cache_table(sweep: dict) -> pd.DataFrame:
    return pd.DataFrame(sweep["prefix_cache"]["points"]).T


def peer_definitions_table(session) -> pd.DataFrame:
    """This arm's measured requests under vLLM's, GuideLLM's and AIPerf's definitions."""
    records = read_records(session.arm_dir / "requests.jsonl", latest_attempt=True)
    return peer_definitions(records).round(2)


def engine_truth_table(sweep: dict) -> pd.DataFrame:
    """Per point: the engine's gauges while the load ran, and its histograms beside the client."""
    rows = {}
    for name, p in sweep["points"].items():
        row = dict(p.get("engine_reconciliation") or {})
        for key, v in (p.get("engine_gauges_during") or {}).items():
            if isinstance(v, dict):
                row[f"{key.split('{', 1)[0]} mean/max"] = f"{v['mean']:g} / {v['max']:g}"
        rows[name] = row
    return pd.DataFrame(rows).T
