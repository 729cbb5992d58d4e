"""The three questions before any benchmark: hardware, workload shape, ops capacity.

Pure functions: the 00_decide notebook turns a team's answers into a shortlist with reasons
and the managed-versus-owned cost arithmetic.
"""
from __future__ import annotations

from dataclasses import dataclass

from stackbook import sizing


@dataclass(frozen=True)
class Answers:
    """What a team knows before choosing."""
    platform: str = "nvidia"            # nvidia | apple | amd | cpu | mixed
    gpus: int = 1
    concurrent_users: int = 1
    shared_prefix: bool = False
    json_output: bool = False
    context_tokens: int = 8192
    ops_engineers: float = 0.0          # people who can own a serving deployment
    on_call: bool = False
    volume: str = "steady"              # steady | spiky | low
    throughput_dominant_cost: bool = False


def hardware_table(g, context_tokens: int, precisions=("bf16", "fp8", "q4_k_m"), artifacts: dict | None = None,
                   kv_precision: str = "bf16", accelerators: list[str] | None = None) -> list[dict]:
    """For each accelerator and weight precision: do the weights fit, and how many sequences
    of `context_tokens` live in what is left (default workspace and activations)."""
    artifacts = artifacts or {}
    rows = []
    cat = sizing.accelerator_catalog()
    for key in accelerators or list(cat):
        hw = cat[key]
        memory = hw.usable_bytes or hw.memory_bytes
        for prec in precisions:
            art = artifacts.get(prec, {}).get("bytes")
            w = sizing.weight_bytes(g.num_parameters, prec, art)
            try:
                r = sizing.size_model(g, memory_bytes=memory, context_tokens=context_tokens, weights_precision=prec,
                                      kv_precision=kv_precision, artifact_bytes=art, bandwidth=hw.bandwidth)
                live, pool, tok_s = r["max_live_sequences"], r["cache_pool_bytes"], r.get("roofline_decode_tok_s")
            except ValueError:
                live, pool, tok_s = 0, 0, None
            rows.append({"accelerator": hw.name, "weights": prec, "weights GB": round(w / 1e9, 1),
                         "memory GB": round(hw.memory_bytes / 1e9), "pool GiB": round(pool / sizing.GiB, 1),
                         "live sequences": live, "fits": live >= 1,
                         "decode bound tok/s": round(tok_s) if tok_s and live else None})
    return rows


def shortlist(a: Answers) -> list[dict]:
    """Candidate stacks with the reason each is on the list; the benchmark decides among them."""
    out = []

    def add(stack: str, reason: str) -> None:
        out.append({"stack": stack, "reason": reason})

    if a.platform == "apple":
        add("MLX", "Apple silicon: the framework built for its unified memory")
        add("llama.cpp", "Apple silicon with Metal: one runner, GGUF quants, a model registry's convenience")
    if a.platform == "cpu":
        add("llama.cpp", "CPU-only: quantized GGUF and hand-written CPU kernels")
        add("vLLM (CPU build)", "CPU-only with many users: continuous batching and paged KV on the CPU")
    if a.platform in ("nvidia", "amd", "mixed"):
        add("vLLM", "the default for serving an API on GPUs: broad model support, continuous batching, paged KV")
    if a.platform in ("nvidia", "amd") and (a.shared_prefix or a.json_output):
        why = " and ".join(w for w, on in (("long prefixes shared across requests (radix-tree reuse)", a.shared_prefix),
                                            ("output that must validate against a schema (fast constrained decoding)",
                                             a.json_output)) if on)
        add("SGLang", f"{why}: the two problems it was built around")
    if a.platform == "nvidia" and a.throughput_dominant_cost and a.ops_engineers >= 1:
        add("TensorRT-LLM", "NVIDIA-only fleet where throughput is the dominant cost and there is engineering time "
                            "for build and compatibility validation")
    if a.platform == "mixed":
        add("MAX", "a heterogeneous fleet, if a young ecosystem is acceptable")
    if a.volume in ("spiky", "low") or (a.ops_engineers < 1 and not a.on_call):
        add("managed endpoint", "low or unpredictable volume, or nobody to upgrade drivers and watch p99: "
                                "pay per token, compare with the arithmetic below")
    return out


def managed_vs_owned(tokens_per_day: float, price_per_million_tokens: float, card_hour_price: float,
                     cards: int = 1, hours_per_day: float = 24.0, ops_hours_per_day: float = 0.0,
                     engineer_hour_price: float = 0.0) -> dict:
    """Daily cost of a metered endpoint against owning cards (plus the people who run them),
    and the token volume at which the two cost the same."""
    managed = tokens_per_day / 1e6 * price_per_million_tokens
    owned = cards * card_hour_price * hours_per_day + ops_hours_per_day * engineer_hour_price
    break_even = owned / price_per_million_tokens * 1e6 if price_per_million_tokens > 0 else float("inf")
    return {"managed_per_day": managed, "owned_per_day": owned, "break_even_tokens_per_day": break_even,
            "cheaper": "managed endpoint" if managed < owned else "owned cards"}


def describe_model(g) -> str:
    """One Markdown line: size, layers by kind, trained context."""
    return (f"**{g.name}**: {g.num_parameters / 1e9:.1f} B parameters, {g.num_layers} layers "
            f"({g.kv_layers} keep a KV cache, {g.linear_layers} linear-attention with a fixed state), "
            f"trained context {g.max_context:,} tokens.")


def cost_by_volume(volumes, price_per_million_tokens: float, card_hour_price: float, **owned) -> list[dict]:
    """managed_vs_owned at each daily token volume, to show where the cheaper option flips.
    `owned` takes managed_vs_owned's keywords (cards, hours_per_day, ops and engineer prices)."""
    rows = []
    for v in volumes:
        c = managed_vs_owned(v, price_per_million_tokens, card_hour_price, **owned)
        rows.append({"tokens per day": f"{v:,.0f}", "managed per day": round(c["managed_per_day"], 2),
                     "owned per day": round(c["owned_per_day"], 2), "cheaper": c["cheaper"]})
    return rows


def cost_summary(cost: dict, tokens_per_day: float) -> str:
    """managed_vs_owned's answer in one Markdown paragraph."""
    return (f"Managed: **{cost['managed_per_day']:,.2f} per day** for {tokens_per_day:,.0f} tokens. "
            f"Owned: **{cost['owned_per_day']:,.2f} per day** (card and operations). "
            f"Break-even at **{cost['break_even_tokens_per_day']:,.0f} tokens per day**; "
            f"at this volume the cheaper option is the **{cost['cheaper']}**.")
