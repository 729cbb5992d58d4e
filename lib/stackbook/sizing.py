"""Memory arithmetic: does the model fit, and how many sequences live at once. Pure functions.

Sizes are bytes; GiB = 2**30, GB = 1e9, stated wherever a figure is printed.
"""
from __future__ import annotations

import difflib
import math
import os
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

import yaml

GiB = 2**30
GB = 10**9

# Effective bits per weight. GGUF block formats carry scales: Q4_1 stores 32 4-bit weights plus an
# fp16 scale and min (5.0 bits); Q8_0 32 8-bit weights plus an fp16 scale (8.5); Q4_K_M is a mix
# whose rule of thumb is ~4.85 (the exact size of an artifact beats any rule: pass artifact_bytes).
BITS_PER_WEIGHT = {"fp32": 32.0, "bf16": 16.0, "fp16": 16.0, "fp8": 8.0, "int8": 8.0, "int4": 4.0,
                   "q8_0": 8.5, "q4_0": 4.5, "q4_1": 5.0, "q4_k_m": 4.85}
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
        raise ValueError(f"unknown weight precision {precision!r}; did you mean {close}? "
                         f"Known: {sorted(BITS_PER_WEIGHT)}")
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


def kv_tokens_in_pool(pool_bytes: float, kv_per_token: float, block_tokens: int = 1) -> int:
    """Tokens of KV a pool holds, rounded down to whole blocks as paged engines allocate them."""
    tokens = int(pool_bytes // kv_per_token)
    return tokens // block_tokens * block_tokens


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


@dataclass(frozen=True)
class Accelerator:
    key: str
    name: str
    memory_bytes: float
    bandwidth: float
    bf16_tflops: float | None
    source: str
    usable_bytes: float | None = None


@lru_cache(maxsize=1)
def accelerator_catalog() -> dict[str, Accelerator]:
    raw = yaml.safe_load((Path(__file__).with_name("data") / "accelerators.yaml").read_text())
    return {k: Accelerator(key=k, **v) for k, v in raw.items()}


def accelerator(key: str) -> Accelerator:
    cat = accelerator_catalog()
    if key == "this-cpu":
        return this_cpu()
    if key not in cat:
        close = difflib.get_close_matches(key, [*cat, "this-cpu"], n=3, cutoff=0.4)
        raise KeyError(f"unknown hardware {key!r}; close matches: {close or 'none'}; "
                       f"catalog: {sorted(cat)} and this-cpu")
    return cat[key]


def this_cpu(measure_bandwidth: bool = True) -> Accelerator:
    """This machine: total memory, and a measured memory-copy bandwidth (one core, numpy)."""
    import numpy as np
    import psutil

    bw = 0.0
    if measure_bandwidth:
        import time
        a = np.ones(64 * 2**20 // 8)
        b = np.empty_like(a)
        best = float("inf")
        for _ in range(5):
            t = time.perf_counter()
            np.copyto(b, a)
            best = min(best, time.perf_counter() - t)
        bw = 2 * a.nbytes / best  # one read and one write per element
    return Accelerator("this-cpu", f"this CPU ({os.cpu_count()} cores)", float(psutil.virtual_memory().total),
                       bw, None, "measured at run time: psutil total memory, numpy copy bandwidth")


def as_dict(obj) -> dict:
    return asdict(obj)
