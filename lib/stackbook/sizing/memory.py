"""Memory arithmetic: does the model fit, and how many sequences live at once. Pure functions.

Sizes are bytes; GiB = 2**30, GB = 1e9, stated wherever a figure is printed.
"""
from __future__ import annotations

import difflib
import math

GiB = 2**30
GB = 10**9

# Effective bits per weight. GGUF block formats carry scales: Q4_1 stores 32 4-bit weights plus an
# fp16 scale and min (5.0 bits); Q8_0 32 8-bit weights plus an fp16 scale (8.5); Q4_K_M is a mix
# whose rule of thumb is ~4.85 (the exact size of an artifact beats any rule: pass artifact_bytes).
BITS_PER_WEIGHT = {"fp32": 32.0, "bf16": 16.0, "fp16": 16.0, "fp8": 8.0, "int8": 8.0, "int4": 4.0,
                   "q8_0": 8.5, "q4_0": 4.5, "q4_1": 5.0, "q4_k_m": 4.85,
                   "mxfp4": 4.25}  # MXFP4: 32 4-bit weights share one 8-bit scale
BYTES_PER_ELEMENT = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "q8_0": 34 / 32, "q4_0": 18 / 32}


def precision_bytes(name: str) -> float:
    try:
        return BYTES_PER_ELEMENT[name]
    except KeyError:
        raise ValueError(f"unknown KV/state precision {name!r}; use one of {sorted(BYTES_PER_ELEMENT)}") from None


def weight_bytes(num_parameters: int, precision: str = "bf16", artifact_bytes: int | None = None) -> int:
    """Bytes of weights: the artifact's exact size when given, else parameters x bits / 8."""
    if artifact_bytes is not None:
        return int(artifact_bytes)
    if precision not in BITS_PER_WEIGHT:
        close = difflib.get_close_matches(precision, BITS_PER_WEIGHT, n=3)
        raise ValueError(f"unknown weight precision {precision!r}" + (f"; did you mean {close}?" if close else "")
                         + f"; known: {sorted(BITS_PER_WEIGHT)}")
    return math.ceil(num_parameters * BITS_PER_WEIGHT[precision] / 8)


def kv_bytes_per_token(kv_layers: int, num_kv_heads: int, head_dim: int, kv_precision: str = "bf16",
                       tensor_parallel: int = 1) -> float:
    """K and V for every layer that keeps a KV cache (linear-attention layers keep none).

    Under tensor parallelism KV heads are split across ranks (replicated when fewer heads than
    ranks), so this is the per-rank figure.
    """
    heads_per_rank = max(1, math.ceil(num_kv_heads / tensor_parallel))
    return kv_layers * 2 * heads_per_rank * head_dim * precision_bytes(kv_precision)


def recurrent_state_bytes_per_sequence(linear_layers: int, linear_num_key_heads: int, linear_num_value_heads: int,
                                       linear_key_head_dim: int, linear_value_head_dim: int,
                                       conv_kernel: int, state_precision: str = "fp32",
                                       conv_precision: str = "bf16") -> float:
    """Gated DeltaNet state per sequence: the recurrent matrix plus the short-convolution window.

    Per layer: value heads x key dim x value dim (the recurrent state, kept in fp32 on the
    reference path), plus (kernel - 1) x conv channels (q, k and v: 2 x key heads x key dim +
    value heads x value dim) for the causal convolution, in the model dtype.
    """
    ssm = linear_num_value_heads * linear_key_head_dim * linear_value_head_dim * precision_bytes(state_precision)
    conv_dim = 2 * linear_num_key_heads * linear_key_head_dim + linear_num_value_heads * linear_value_head_dim
    conv = (conv_kernel - 1) * conv_dim * precision_bytes(conv_precision)
    return linear_layers * (ssm + conv)


def bytes_per_sequence(context_tokens: int, kv_per_token: float, state_per_sequence: float = 0.0) -> float:
    return context_tokens * kv_per_token + state_per_sequence


def max_live_sequences(pool_bytes: float, context_tokens: int, kv_per_token: float,
                       state_per_sequence: float = 0.0) -> int:
    """Whole sequences of `context_tokens` that fit in the cache pool at once."""
    per_seq = bytes_per_sequence(context_tokens, kv_per_token, state_per_sequence)
    if per_seq <= 0:
        raise ValueError("a sequence must cost some memory: check kv_per_token and the context")
    return int(pool_bytes // per_seq)


def cache_pool_bytes(memory_bytes: float, weights: float, workspace: float = 0.0, activations: float = 0.0,
                     utilization: float = 1.0) -> float:
    """What is left for cache after weights, workspace and activations, of the usable fraction."""
    pool = memory_bytes * utilization - weights - workspace - activations
    if pool <= 0:
        raise ValueError(f"nothing is left for the cache: memory {memory_bytes / GiB:.2f} GiB x {utilization} "
                         f"- weights {weights / GiB:.2f} GiB - workspace {workspace / GiB:.2f} GiB - "
                         f"activations {activations / GiB:.2f} GiB = {pool / GiB:.2f} GiB")
    return pool


def roofline_decode_tok_s(bandwidth_bytes_s: float, weights: float, context_tokens: int = 0,
                          kv_per_token: float = 0.0, state_per_sequence: float = 0.0) -> float:
    """Upper bound on single-stream decode: every token reads the weights, the KV so far and the
    state (read and write) once."""
    return bandwidth_bytes_s / (weights + context_tokens * kv_per_token + 2 * state_per_sequence)



# --------------------------------------------------------------------------- whole models

def model_kv_bytes_per_token(g, kv_precision: str = "bf16", tensor_parallel: int = 1) -> float:
    """KV per token of context for the layers whose cache grows with the context.

    Full-attention layers only: linear-attention (Gated DeltaNet) layers keep a fixed state
    instead, and sliding-window layers are counted per sequence (they stop growing at the
    window). MLA keeps one latent (kv_lora_rank + rope dims) per layer, shared by all heads and
    replicated across tensor-parallel ranks.
    """
    if g.is_mla:
        return g.kv_layers * (g.kv_lora_rank + g.qk_rope_head_dim) * precision_bytes(kv_precision)
    return kv_bytes_per_token(g.kv_layers, g.num_kv_heads, g.head_dim, kv_precision, tensor_parallel)


def model_kv_bytes_per_sequence(g, context_tokens: int, kv_precision: str = "bf16", tensor_parallel: int = 1) -> float:
    full = context_tokens * model_kv_bytes_per_token(g, kv_precision, tensor_parallel)
    if g.sliding_layers and g.sliding_window:
        per_tok = kv_bytes_per_token(g.sliding_layers, g.num_kv_heads, g.head_dim, kv_precision, tensor_parallel)
        full += min(context_tokens, g.sliding_window) * per_tok
    return full


def resolve_state_precision(g, requested: str | None = None) -> str:
    """The recurrent state's precision: the one asked for, else the model's own config
    (mamba_ssm_dtype), else fp32, as the reference implementation keeps it. The protocol's
    `state: none` asks for nothing."""
    if requested and requested != "none":
        return requested
    return g.state_dtype or "fp32"


def model_state_bytes_per_sequence(g, state_precision: str | None = None, conv_precision: str = "bf16") -> float:
    """Recurrent state per sequence (0 for a model without linear-attention or Mamba layers), the
    SSM / recurrent matrix at resolve_state_precision(g, state_precision), the convolution window
    in `conv_precision`."""
    if not g.is_hybrid:
        return 0.0
    state = resolve_state_precision(g, state_precision)
    gdn = recurrent_state_bytes_per_sequence(
        g.linear_layers, g.linear_num_key_heads, g.linear_num_value_heads, g.linear_key_head_dim,
        g.linear_value_head_dim, g.linear_conv_kernel, state, conv_precision) if g.linear_layers else 0.0
    mamba = g.mamba_layers * (g.mamba_ssm_elements * precision_bytes(state)
                              + g.mamba_conv_elements * precision_bytes(conv_precision))
    return gdn + mamba


def state_bytes_per_layer(g, state_precision: str, conv_precision: str = "bf16") -> float:
    return model_state_bytes_per_sequence(g, state_precision, conv_precision) / g.state_layers


# Defaults for what a profiler would measure; stated so a reader can replace them.
DEFAULT_WORKSPACE_GIB = 0.5
DEFAULT_ACTIVATIONS_GIB = 0.5
DEFAULTS_SOURCE = ("workspace and activations default to 0.5 GiB each: the seed's 23.3 GiB pool on an 80 GB "
                   "card leaves ~0.91 GiB for both; measured vLLM activation peaks on H100 are 4.8-5.6 GiB "
                   "for dense 8-70B models (llm-d empirical results). Pass measured values or --pool-gib.")


class SizingInputError(ValueError):
    """An option or field the arithmetic cannot use, with the option named and a fix."""
    def __init__(self, option: str, message: str):
        super().__init__(message)
        self.option = option


def _whole_at_least(option: str, value, minimum: int, fix: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise SizingInputError(option, f"{option} {value!r}: must be a whole number of at least {minimum}; {fix}")


def tensor_parallel_problem(g, tensor_parallel: int) -> str | None:
    """Why `tensor_parallel` ranks cannot split this model's heads, or None: query heads must
    divide evenly, KV heads divide or are replicated whole."""
    if g.num_attention_heads % tensor_parallel:
        return f"{g.num_attention_heads} attention heads do not divide across {tensor_parallel} ranks"
    kv = g.num_kv_heads
    if not g.is_mla and kv % tensor_parallel and tensor_parallel % kv:
        return f"{kv} KV heads neither divide across nor replicate evenly over {tensor_parallel} ranks"
    return None


def check_request(g, *, context_tokens, tensor_parallel, pool_bytes=None, workspace_bytes=0.0,
                  activations_bytes=0.0, artifact_bytes=None, memory_bytes=None, kv_precision=None,
                  state_precision=None, weights_precision=None) -> None:
    """Refuse, by option and with a fix, what the arithmetic cannot size."""
    _whole_at_least("--context", context_tokens, 1, "give the tokens per sequence, e.g. --context 8192")
    if g.max_context and context_tokens > g.max_context:
        raise SizingInputError("--context", f"--context {context_tokens:,} exceeds {g.name}'s maximum of "
                                            f"{g.max_context:,} tokens (max_position_embeddings); give at most that")
    _whole_at_least("--tp", tensor_parallel, 1, "give the tensor-parallel ranks, e.g. --tp 1")
    why = tensor_parallel_problem(g, tensor_parallel)
    if why:
        fits = [d for d in TENSOR_PARALLEL_DEGREES if tensor_parallel_problem(g, d) is None]
        raise SizingInputError("--tp", f"--tp {tensor_parallel}: {why}; use one of {fits}")
    for option, v, unit in (("--pool-gib", pool_bytes, GiB), ("--artifact-bytes", artifact_bytes, 1)):
        if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise SizingInputError(option, f"{option} {v / unit:g}: must be a positive size; leave it out to derive it")
    for option, v in (("--workspace-gib", workspace_bytes), ("--activations-gib", activations_bytes)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
            raise SizingInputError(option, f"{option} {v / GiB:g}: must be zero GiB or more")
    for option, name in (("--kv-dtype", kv_precision), ("--state-dtype", state_precision)):
        if name is not None and name != "none" and name not in BYTES_PER_ELEMENT:
            raise SizingInputError(option,
                                   f"{option} {name!r}: unknown precision; use one of {sorted(BYTES_PER_ELEMENT)}")
    if weights_precision is not None and weights_precision not in BITS_PER_WEIGHT:
        close = difflib.get_close_matches(weights_precision, BITS_PER_WEIGHT, n=3)
        raise SizingInputError("--weights", f"--weights {weights_precision!r}: unknown weight precision"
                               + (f"; did you mean {close}?" if close else "") + f"; known: {sorted(BITS_PER_WEIGHT)}")
    if pool_bytes is not None and memory_bytes is not None and pool_bytes > memory_bytes:
        raise SizingInputError("--pool-gib", f"a cache pool of {pool_bytes / GiB:.2f} GiB is larger than the device's "
                                             f"{memory_bytes / GiB:.2f} GiB; give the pool the engine reports")


def default_weights(g, precision: str | None, artifact_bytes: int | None) -> tuple[str, int | None, str]:
    """The weight precision and exact bytes when the user names neither: the checkpoint's own
    (its safetensors bytes, its quantization_config), else bf16."""
    if precision is not None:
        return precision, artifact_bytes, "given (--weights)"
    if artifact_bytes is None and g.checkpoint_bytes:
        return g.shipped_precision or "bf16", g.checkpoint_bytes, "the checkpoint's safetensors bytes as shipped"
    if g.shipped_precision:
        return g.shipped_precision, artifact_bytes, g.precision_source
    return "bf16", artifact_bytes, "bf16 (the config declares no quantization; --weights overrides)"


def size_model(g, *, memory_bytes: float, context_tokens: int, weights_precision: str = "bf16",
               kv_precision: str = "bf16", state_precision: str | None = None, artifact_bytes: int | None = None,
               pool_bytes: float | None = None, workspace_bytes: float = DEFAULT_WORKSPACE_GIB * GiB,
               activations_bytes: float = DEFAULT_ACTIVATIONS_GIB * GiB, tensor_parallel: int = 1,
               bandwidth: float | None = None) -> dict:
    """The whole budget for one model on one device (per tensor-parallel rank), whether or not it
    fits: the KV and state figures do not depend on it."""
    if g.num_parameters is None and artifact_bytes is None:
        raise SizingInputError("--artifact-bytes", f"{g.name}: the parameter count is unknown; give a model with "
                               "weights, a catalog name, or --artifact-bytes")
    check_request(g, context_tokens=context_tokens, tensor_parallel=tensor_parallel, pool_bytes=pool_bytes,
                  workspace_bytes=workspace_bytes, activations_bytes=activations_bytes,
                  artifact_bytes=artifact_bytes, memory_bytes=memory_bytes, kv_precision=kv_precision,
                  state_precision=state_precision, weights_precision=weights_precision)
    weights = weight_bytes(g.num_parameters or 0, weights_precision, artifact_bytes) / tensor_parallel
    kv_tok = model_kv_bytes_per_token(g, kv_precision, tensor_parallel)
    kv_seq = model_kv_bytes_per_sequence(g, context_tokens, kv_precision, tensor_parallel)
    state = model_state_bytes_per_sequence(g, state_precision) / tensor_parallel
    per_seq = kv_seq + state
    if pool_bytes is None:
        pool = memory_bytes - weights - workspace_bytes - activations_bytes
        pool_source = "derived: memory - weights - workspace - activations"
    else:
        pool, pool_source = pool_bytes, "given"
    live = max(0, int(pool // per_seq)) if per_seq > 0 else 0
    fits = weights + per_seq <= memory_bytes and pool >= per_seq
    out = {
        "model": g.name, "context": context_tokens, "tensor_parallel": tensor_parallel,
        "parameters_total": g.num_parameters, "parameters_active": g.active_parameters or g.num_parameters,
        "parameters_source": g.parameters_source or g.source, "parameters_by_part": dict(g.parameter_parts),
        "layer_schedule": dict(g.layer_counts),
        "weights_precision": weights_precision, "kv_precision": kv_precision,
        "state_precision": resolve_state_precision(g, state_precision) if g.is_hybrid else None,
        "weights_bytes": int(weights), "kv_bytes_per_token": kv_tok, "kv_bytes_per_sequence": kv_seq,
        "state_bytes_per_sequence": state, "bytes_per_sequence": per_seq,
        "cache_pool_bytes": int(max(pool, 0)), "cache_pool_source": pool_source, "max_live_sequences": live,
        "fits": fits, "shortfall_bytes": 0 if fits
        else int(math.ceil(max(per_seq - pool, weights + per_seq - memory_bytes))),
        "memory_bytes": memory_bytes,
    }
    if pool_bytes is None:
        out["assumptions"] = {"workspace_bytes": workspace_bytes, "activations_bytes": activations_bytes,
                              "source": DEFAULTS_SOURCE}
    if bandwidth:
        out["roofline_decode_tok_s"] = roofline_decode_tok_s(bandwidth, weights, context_tokens, kv_tok, state)
    return out


TENSOR_PARALLEL_DEGREES = (1, 2, 4, 8, 16, 32, 64)


def size_verdict(g, **kwargs) -> dict:
    """size_model's budget whether or not the model fits, with the smallest tensor-parallel degree
    (of 1, 2, 4 ... 64 that split the heads) at which weights and one sequence fit per rank, and
    the live sequences there: "does not fit" is a verdict with numbers, not an error."""
    tp = kwargs.pop("tensor_parallel", 1)
    out = size_model(g, tensor_parallel=tp, **kwargs)
    smallest = None
    for d in TENSOR_PARALLEL_DEGREES:
        if tensor_parallel_problem(g, d) is None:
            r = size_model(g, tensor_parallel=d, **kwargs)
            if r["fits"]:
                smallest = r
                break
    out["smallest_tensor_parallel_that_fits"] = smallest["tensor_parallel"] if smallest else (
        f"none up to {TENSOR_PARALLEL_DEGREES[-1]}")
    out["cards_needed"] = tp if out["fits"] else (smallest["tensor_parallel"] if smallest else None)
    out["max_live_sequences_at_cards_needed"] = (out["max_live_sequences"] if out["fits"] else
                                                 smallest["max_live_sequences"] if smallest else 0)
    return out


def assumption_table(g, pool_bytes: float, context_tokens: int) -> list[dict]:
    """Live sequences under each common assumption: why calculators disagree."""
    rows = []
    for kv, state, label in [("bf16", "fp32", "bf16 KV, fp32 state (reference path)"),
                             ("bf16", "bf16", "bf16 KV, bf16 state"),
                             ("bf16", None, "bf16 KV, state ignored (KV-only rule)"),
                             ("fp8", "fp32", "fp8 KV, fp32 state"),
                             ("fp8", None, "fp8 KV, state ignored")]:
        st = model_state_bytes_per_sequence(g, state) if state else 0.0
        if state is None and not g.is_hybrid:
            continue
        per = model_kv_bytes_per_sequence(g, context_tokens, kv) + st
        rows.append({"assumption": label, "GiB per sequence": round(per / GiB, 4),
                     "live sequences": int(pool_bytes // per)})
    return rows


def weights_by_precision(num_parameters: int, artifacts: dict | None = None,
                         precisions=("bf16", "fp8", "int4", "q8_0", "q4_k_m")) -> list[dict]:
    """Weight bytes under each precision; a known artifact's exact size replaces the rule of
    thumb and gives its effective bits per weight."""
    artifacts = artifacts or {}
    rows = []
    for prec in precisions:
        art = artifacts.get(prec)
        b = weight_bytes(num_parameters, prec, art["bytes"] if art else None)
        rows.append({"precision": prec, "bytes": b, "GB": round(b / GB, 2), "GiB": round(b / GiB, 2),
                     "bits per weight": round(8 * b / num_parameters, 2),
                     "how": f"exact artifact size: {art['source']}" if art
                     else f"{BITS_PER_WEIGHT[prec]} bits/weight rule"})
    return rows
