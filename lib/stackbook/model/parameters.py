"""An estimate of a decoder's parameters from its config.json alone, for an architecture
transformers does not define (stackbook.model.definition counts the rest exactly). Counted part by
part (embeddings tied or not, attention including MLA and gated queries, Gated DeltaNet layers,
dense and expert MLPs, norms), so each part can be checked."""
from __future__ import annotations

from stackbook.model.schedule import FULL, LINEAR, SLIDING, schedule_from_config

GATED_QUERY_TYPES = ("qwen3_next", "qwen3_5")      # q_proj also produces the output gate
QK_NORM_TYPES = ("qwen3", "qwen3_moe", "qwen3_next", "qwen3_5")


def _attention(cfg: dict, h: int) -> int:
    """One attention layer: projections, their biases and per-head norms or sinks."""
    heads = cfg["num_attention_heads"]
    if cfg.get("kv_lora_rank"):  # multi-head latent attention (DeepSeek V2/V3)
        nope, rope, v = cfg.get("qk_nope_head_dim", 128), cfg["qk_rope_head_dim"], cfg.get("v_head_dim", 128)
        kv_rank, q_rank = cfg["kv_lora_rank"], cfg.get("q_lora_rank")
        q = (h * q_rank + q_rank + q_rank * heads * (nope + rope)) if q_rank else h * heads * (nope + rope)
        kv = h * (kv_rank + rope) + kv_rank + kv_rank * heads * (nope + v)
        return q + kv + heads * v * h
    hd = cfg.get("head_dim") or h // heads
    kv_heads = cfg.get("num_key_value_heads", heads)
    gate = 2 if cfg.get("model_type") in GATED_QUERY_TYPES else 1
    n = h * heads * hd * gate + 2 * h * kv_heads * hd + heads * hd * h
    if cfg.get("attention_bias"):
        n += heads * hd + 2 * kv_heads * hd + h
    if cfg.get("model_type") in QK_NORM_TYPES:
        n += 2 * hd
    if cfg.get("model_type") == "gpt_oss":
        n += heads  # attention sinks
    return n


def _linear_attention(cfg: dict, h: int) -> int:
    """One Gated DeltaNet layer (Qwen3-Next, Qwen3.5): projections, short convolution, gates, norm."""
    nk, nv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    dk, dv = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
    key, value = nk * dk, nv * dv
    in_proj = h * (2 * key + 2 * value) + h * 2 * nv          # q, k, v, z and the b, a gates
    conv = (2 * key + value) * cfg.get("linear_conv_kernel_dim", 4)
    return in_proj + conv + 2 * nv + dv + value * h           # dt_bias, A_log, norm, out_proj


def _mlp(h: int, inter: int) -> int:
    return 3 * h * inter  # gate, up, down


def _moe(cfg: dict, h: int) -> tuple[int, int]:
    """One expert layer: (all parameters, those active per token)."""
    experts = cfg.get("num_experts") or cfg.get("n_routed_experts") or cfg.get("num_local_experts")
    per_token = cfg.get("num_experts_per_tok", 1)
    inter = cfg.get("moe_intermediate_size") or cfg["intermediate_size"]
    expert = _mlp(h, inter) + ((2 * inter + h) if cfg.get("model_type") == "gpt_oss" else 0)  # gpt-oss: biases
    router = h * experts + (experts if cfg.get("model_type") in ("gpt_oss", "deepseek_v3") else 0)
    shared = cfg.get("n_shared_experts", 0) * _mlp(h, inter)
    if cfg.get("shared_expert_intermediate_size"):
        shared += _mlp(h, cfg["shared_expert_intermediate_size"]) + h  # and its gate
    return experts * expert + router + shared, per_token * expert + router + shared


def parameters_from_config(cfg: dict) -> dict:
    """Total and active parameters, and the parts they add up from, for a Hugging Face config."""
    cfg = cfg.get("text_config", cfg)
    h, layers, vocab = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    sched = schedule_from_config(cfg, layers)
    full, sliding, linear = sched.count(FULL), sched.count(SLIDING), sched.count(LINEAR)
    embeddings = vocab * h
    head = 0 if cfg.get("tie_word_embeddings", False) else vocab * h
    attention = (full + sliding) * _attention(cfg, h)
    linear_attention = linear * _linear_attention(cfg, h) if linear else 0
    is_moe = bool(cfg.get("num_experts") or cfg.get("n_routed_experts") or cfg.get("num_local_experts"))
    dense_layers = cfg.get("first_k_dense_replace", 0) if is_moe else layers
    dense = dense_layers * _mlp(h, cfg["intermediate_size"]) if dense_layers else 0
    moe_total, moe_active = _moe(cfg, h) if is_moe else (0, 0)
    experts = (layers - dense_layers) * moe_total
    norms = 2 * h * layers + h
    total = embeddings + head + attention + linear_attention + dense + experts + norms
    active = total - experts + (layers - dense_layers) * moe_active
    return {"total": total, "active": active,
            "parts": {"embeddings": embeddings, "lm_head": head, "attention": attention,
                      "linear_attention": linear_attention, "dense_mlp": dense, "expert_mlp": experts,
                      "norms": norms}}
