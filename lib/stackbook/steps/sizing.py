"""The sizing step of 10_sizing: the arithmetic for this arm, the engine's accounting predicted,
and the tables the notebook shows."""
from __future__ import annotations

import time

import pandas as pd

from stackbook import sizing
from stackbook.engines.spec import CapacityBasis
from stackbook.evidence.files import read_json, update_results, write_json_atomic
from stackbook.model.geometry import geometry_for


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


def run_bandwidth(run_dir) -> dict:
    """This host's memory bandwidth for the run: measured by the first arm that needs it, written
    to the run's host.json and read back by every later arm, so all arms share one figure."""
    from stackbook.sizing.hardware import measure_cpu_bandwidth

    known = read_json(run_dir.host, None)
    if known and known.get("bandwidth"):
        return known["bandwidth"]
    measured = measure_cpu_bandwidth()
    run_dir.create()
    write_json_atomic(run_dir.host, {**(known or {}), "bandwidth": measured, "measured_unix": time.time()})
    return measured


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
    hw = (sizing.this_cpu(bandwidth=run_bandwidth(session.run_dir)) if hw_spec.accelerator == "this-cpu"
          else sizing.accelerator(hw_spec.accelerator))
    prec = p.precision
    spec = session.adapter.spec
    pool = spec.cache_pool_bytes()
    if pool is None and hw_spec.pool_gib:
        pool = hw_spec.pool_gib * sizing.GiB
    budget = sizing.size_model(
        g, memory_bytes=hw.usable_bytes or hw.memory_bytes, context_tokens=p.context_length,
        weights_precision=prec.weights, kv_precision=prec.kv_cache, state_precision=prec.state,
        artifact_bytes=session.campaign.model.artifact_bytes, pool_bytes=pool,
        workspace_bytes=hw_spec.workspace_gib * sizing.GiB, activations_bytes=hw_spec.activations_gib * sizing.GiB,
        bandwidth=hw.bandwidth or None)
    predicted = spec.predicted_capacity(CapacityBasis(
        geometry=g, protocol=p, device_memory_bytes=hw.memory_bytes,
        activations_bytes=hw_spec.activations_gib * sizing.GiB, artifact_bytes=session.campaign.model.artifact_bytes,
        pool_bytes=budget["cache_pool_bytes"] if pool is not None else None))
    out = {
        "geometry": {"name": g.name, "architecture": g.architecture, "parameters": g.num_parameters,
                     "layers": g.num_layers, "full_attention_layers": g.kv_layers,
                     "sliding_window_layers": g.sliding_layers, "linear_attention_layers": g.linear_layers,
                     "mamba_layers": g.mamba_layers, "layer_schedule": dict(g.layer_counts),
                     "kv_heads": g.num_kv_heads, "head_dim": g.head_dim, "mla": g.is_mla,
                     "experts": g.num_experts, "trained_context": g.max_context, "source": g.source},
        "hardware": {"name": hw.name, "memory_bytes": hw.memory_bytes, "bandwidth_bytes_s": hw.bandwidth,
                     "source": hw.source,
                     **({"bandwidth_measured": read_json(session.run_dir.host, {}).get("bandwidth"),
                         "bandwidth_file": session.run_dir.host.name}
                        if hw_spec.accelerator == "this-cpu" else {})},
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
        ("KV per token", s["kv_bytes_per_token"],
         f"{s['geometry']['full_attention_layers']} full-attention layers, {s['kv_precision']}"),
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
    from stackbook.model.geometry import model_catalog
    spec = session.campaign.model
    artifacts = model_catalog().get(spec.catalog, {}).get("artifacts") if spec.source == "catalog" else None
    rows = sizing.weights_by_precision(s["geometry"]["parameters"], artifacts)
    return pd.DataFrame(rows).set_index("precision")


def engine_accounting(s: dict) -> pd.DataFrame:
    return pd.Series({k: v for k, v in s["predicted_capacity"].items() if k != "rule"}, dtype=object).to_frame(
        "engine accounting")


def capacity_table(s: dict) -> pd.DataFrame:
    """Predicted against realized, and each of the engine's own limits with its configured value:
    realized concurrency is the smallest of them."""
    pred, real = s["predicted_capacity"], s["realized_capacity"]
    rows = []
    for key in ("kv_tokens", "max_concurrency"):
        pv, rv = pred.get(key), real.get(key)
        rows.append({"quantity": key, "predicted": pv, "realized (engine)": rv,
                     "realized / predicted": (rv / pv) if pv and rv else None})
    for name, limit in (real.get("limits") or {}).items():
        bound = " (binds)" if real.get("max_concurrency_bound_by") == name else ""
        rows.append({"quantity": f"limit: {name}, {limit['unit']}{bound}", "configured": limit["configured"],
                     "realized (engine)": limit["realized"], "source": limit["source"]})
    return pd.DataFrame(rows)


def roofline_table(s: dict) -> pd.DataFrame:
    """The bandwidth bound on single-stream decode at the protocol's context, and where the
    bandwidth figure came from (catalog, or measured on this CPU)."""
    hw = s["hardware"]
    return pd.Series({"device": hw["name"],
                      "bandwidth (GB/s)": round(hw["bandwidth_bytes_s"] / 1e9, 1),
                      "decode bound at this context (tok/s)": round(s.get("roofline_decode_tok_s") or 0, 1),
                      "bandwidth source": hw["source"]}).to_frame("value")
