"""Each engine's own accounting of a cache pool: vLLM's block rule (hybrid blocks inflated to the
state page) and SGLang's split between recurrent-state slots and KV. Pure functions."""
from __future__ import annotations

from stackbook.sizing.memory import (model_kv_bytes_per_token, model_state_bytes_per_sequence, precision_bytes,
                                     state_bytes_per_layer)

import math


def vllm_kv_accounting(g, available_kv_bytes: float, max_model_len: int, kv_precision: str = "bf16",
                       state_precision: str = "fp32", block_size: int = 16) -> dict:
    """How vLLM (V1) turns 'Available KV cache memory' into blocks, its 'KV cache size' and its
    'Maximum concurrency for N tokens per request' line.

    Layers are grouped so every group has the same number of layers; for hybrids the attention
    block is inflated until one attention page is at least one state page (16-token steps), and
    each request needs ceil(max_model_len / block) attention blocks plus one block per state group.
    """
    attn_page_1tok = 2 * g.num_kv_heads * g.head_dim * precision_bytes(kv_precision)
    if g.is_mla:
        attn_page_1tok = (g.kv_lora_rank + g.qk_rope_head_dim) * precision_bytes(kv_precision)
    out: dict = {"available_kv_bytes": available_kv_bytes}
    if g.is_hybrid:
        state_page = state_bytes_per_layer(g, state_precision)
        block = 16 * math.ceil(state_page / (16 * attn_page_1tok))
        page = block * attn_page_1tok
        group_size = min(g.kv_layers, g.state_layers)
        attn_groups = math.ceil(g.kv_layers / group_size)
        state_groups = math.ceil(g.state_layers / group_size)
        out.update(attention_block_tokens=block, page_bytes=page, state_page_bytes=state_page,
                   state_page_padding_pct=round(100 * (page / state_page - 1), 2))
    else:
        block = block_size
        page = block * attn_page_1tok
        group_size = g.kv_layers
        attn_groups, state_groups = 1, 0
    groups = attn_groups + state_groups
    num_blocks = int(available_kv_bytes // page // group_size)
    blocks_per_request = attn_groups * math.ceil(max_model_len / block) + state_groups
    out.update(kv_cache_groups=groups, layers_per_group=group_size, num_blocks=num_blocks,
               kv_cache_size_tokens=num_blocks // groups * block,
               blocks_per_request=blocks_per_request,
               max_concurrency=round(num_blocks / blocks_per_request, 2))
    return out


SGLANG_STATE_SLOTS = {"disabled": 1, "no_buffer": 3, "extra_buffer_lazy": 4, "extra_buffer": 5}


def sglang_kv_accounting(g, pool_bytes: float, context_tokens: int, kv_precision: str = "bf16",
                         state_precision: str = "fp32", mamba_full_memory_ratio: float = 0.9,
                         radix_cache: str = "extra_buffer") -> dict:
    """How SGLang splits its static pool between recurrent-state slots and KV tokens for a
    hybrid model, and how many requests it then runs at once.

    State gets pool x r / (1 + r) in whole per-request slots; KV tokens get the rest. Each
    running request holds S state slots (1 with the radix cache off, 3 no_buffer, 5
    extra_buffer), so requests <= slots // S, and <= KV tokens // context.
    """
    kv_tok = model_kv_bytes_per_token(g, kv_precision)
    if radix_cache not in SGLANG_STATE_SLOTS:
        raise ValueError(f"radix_cache {radix_cache!r}: use one of {sorted(SGLANG_STATE_SLOTS)}")
    s = SGLANG_STATE_SLOTS[radix_cache]
    out: dict = {"pool_bytes": pool_bytes, "mamba_full_memory_ratio": mamba_full_memory_ratio,
                 "radix_cache": radix_cache, "state_slots_per_request": s}
    if g.is_hybrid:
        state = model_state_bytes_per_sequence(g, state_precision, "bf16")
        slots = int(pool_bytes * mamba_full_memory_ratio / (1 + mamba_full_memory_ratio) // state)
        kv_bytes = pool_bytes - slots * state
        max_tokens = int(kv_bytes // kv_tok)
        running = min(max_tokens // 2, slots // s)
        out.update(state_bytes_per_slot=state, max_mamba_cache_size=slots)
    else:
        max_tokens = int(pool_bytes // kv_tok)
        running = max_tokens // 2
    out.update(max_total_num_tokens=max_tokens, max_running_requests=running,
               max_concurrency=min(running, max_tokens // context_tokens))
    return out


def balanced_mamba_ratio(g, context_tokens: int, kv_precision: str = "bf16", state_precision: str = "fp32",
                         radix_cache: str = "extra_buffer") -> float:
    """The --mamba-full-memory-ratio at which state slots and KV run out together:
    (S x state bytes) / (context x KV bytes per token)."""
    s = SGLANG_STATE_SLOTS[radix_cache]
    return (s * model_state_bytes_per_sequence(g, state_precision)
            / (context_tokens * model_kv_bytes_per_token(g, kv_precision)))
