"""The layer schedule: what each decoder layer keeps per sequence, derived from the config as the
model's own code derives it. A key or layer kind this module does not read is refused by name: a
schedule that guessed would size a hybrid as an all-attention model without a word."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

FULL, SLIDING, LINEAR, MAMBA = "full_attention", "sliding_attention", "linear_attention", "mamba"
DENSE, MOE, NONE = "dense", "moe", "none"

# transformers' `layer_types` values and what they keep.
LAYER_TYPE_VALUES = {"full_attention": FULL, "attention": FULL, "sliding_attention": SLIDING,
                     "sliding_window_attention": SLIDING, "linear_attention": LINEAR}
# Nemotron-H's `hybrid_override_pattern`: one letter per layer, each layer one mixer or one MLP.
NEMOTRON_LETTERS = {"M": (MAMBA, NONE), "*": (FULL, NONE), "-": (None, DENSE), "E": (None, MOE)}
NEMOTRON_BLOCK_TYPES = {"mamba": (MAMBA, NONE), "linear_attention": (MAMBA, NONE), "attention": (FULL, NONE),
                        "full_attention": (FULL, NONE), "mlp": (None, DENSE), "moe": (None, MOE)}

# Keys that shape layers in architectures this schedule does not derive (Falcon-H1's parallel
# Mamba heads, Zamba's shared blocks, Llama 4's chunked attention, Granite's hybrid, ...).
FOREIGN_LAYER_KEY = re.compile(r"mamba|ssm|attention_chunk|no_rope_layer|moe_layers|interleave_moe|block_type|"
                               r"layer_period|layer_offset|hybrid|_pattern$|layer_ids")
# Keys the families below do carry that change nothing about what a layer keeps.
KNOWN_KEYS = {
    "jamba": {"attn_layer_period", "attn_layer_offset", "expert_layer_period", "expert_layer_offset",
              "mamba_d_state", "mamba_d_conv", "mamba_expand", "mamba_dt_rank", "mamba_conv_bias",
              "mamba_proj_bias", "use_mamba_kernels", "use_mambapy"},
    "nemotron_h": {"hybrid_override_pattern", "layers_block_type", "mtp_layers_block_type",
                   "mtp_hybrid_override_pattern", "mamba_num_heads", "mamba_head_dim", "mamba_hidden_act",
                   "mamba_proj_bias", "mamba_ssm_cache_dtype", "use_mamba_kernels", "ssm_state_size"},
    "*": {"mamba_ssm_dtype", "sliding_window_pattern", "_sliding_window_pattern"},
}


@dataclass(frozen=True)
class LayerSchedule:
    """Per decoder layer: its mixer (full, sliding, linear attention, Mamba; None for a Nemotron-H
    MLP layer) and its feed-forward (dense, MoE, none), plus where each came from."""
    mixers: tuple
    ffns: tuple
    source: str

    def count(self, kind: str) -> int:
        return sum(m == kind for m in self.mixers)

    def counts(self) -> dict:
        c = Counter(m for m in self.mixers if m is not None)
        c.update(f"{f}_ffn" for f in self.ffns if f != NONE)
        return {"layers": len(self.mixers), **dict(sorted(c.items()))}


class ScheduleError(ValueError):
    pass


def _refuse_foreign_keys(cfg: dict, model_type: str, where: str) -> None:
    known = KNOWN_KEYS["*"] | KNOWN_KEYS.get(model_type, set())
    for key in sorted(cfg):
        if FOREIGN_LAYER_KEY.search(key) and key not in known and cfg[key] not in (None, False, [], ""):
            raise ScheduleError(
                f"{where}: model type {model_type!r} has {key!r}, which the layer schedule does not read, so "
                f"what its layers keep per sequence is unknown; supported layer styles: layer_types, sliding_window "
                f"(every layer, alternating, sliding_window_pattern), Jamba (attn_layer_period/offset), "
                f"Nemotron-H (hybrid_override_pattern), Gated DeltaNet (linear_* keys). stackbook cannot size this "
                f"architecture: read its capacity from the engine's own log (vLLM: 'Maximum concurrency for N "
                f"tokens per request')")


def _moe_ffns(cfg: dict, layers: int, where: str) -> list:
    """Which layers route to experts, by the keys MoE families use."""
    experts = cfg.get("num_experts") or cfg.get("n_routed_experts") or cfg.get("num_local_experts")
    if not experts:
        return [DENSE] * layers
    first_dense = cfg.get("first_k_dense_replace") or 0
    step = cfg.get("decoder_sparse_step") or 1        # Qwen MoE: every step-th layer
    freq = cfg.get("moe_layer_freq") or 1              # DeepSeek: layer index divisible by it
    only = cfg.get("mlp_only_layers") or []
    dense_only = {v for v in only if isinstance(v, int)} if isinstance(only, list) else set()
    if not all(isinstance(v, int) and v >= 0 for v in (first_dense, step, freq)) or not step or not freq:
        raise ScheduleError(f"{where}: first_k_dense_replace, decoder_sparse_step and moe_layer_freq must be whole "
                            f"numbers (the last two at least 1); they are {first_dense!r}, {step!r}, {freq!r}")
    return [MOE if i >= first_dense and (i + 1) % step == 0 and i % freq == 0 and i not in dense_only else DENSE
            for i in range(layers)]


def _sliding(cfg: dict, model_type: str, layers: int) -> tuple[list, str]:
    window = cfg.get("sliding_window")
    if not window or cfg.get("use_sliding_window") is False:
        return [FULL] * layers, "every layer full attention"
    pattern = cfg.get("sliding_window_pattern") or cfg.get("_sliding_window_pattern")
    if pattern:  # Gemma 3, Cohere 2: every pattern-th layer global
        return [FULL if (i + 1) % pattern == 0 else SLIDING for i in range(layers)], \
            f"sliding_window_pattern {pattern}: every {pattern}th layer full"
    if model_type == "gemma2":
        return [SLIDING if i % 2 == 0 else FULL for i in range(layers)], "Gemma 2: alternating, even layers sliding"
    if cfg.get("use_sliding_window") and cfg.get("max_window_layers") is not None:  # Qwen 2 style
        start = cfg["max_window_layers"]
        return [SLIDING if i >= start
                else FULL for i in range(layers)], f"sliding from layer {start} (max_window_layers)"
    return [SLIDING] * layers, f"sliding_window {window} on every layer"


def schedule_from_config(cfg: dict, layers: int, where: str = "config") -> LayerSchedule:
    """The schedule as transformers derives it for this config's model type."""
    model_type = str(cfg.get("model_type", ""))
    _refuse_foreign_keys(cfg, model_type, where)
    if model_type == "nemotron_h":
        return _nemotron_h(cfg, where)
    if "attn_layer_period" in cfg or "attn_layer_offset" in cfg:  # Jamba
        period, offset = cfg.get("attn_layer_period"), cfg.get("attn_layer_offset")
        if not isinstance(period, int) or not isinstance(offset, int) or period < 1 or not 0 <= offset < period:
            raise ScheduleError(f"{where}: attn_layer_period {period!r} / attn_layer_offset {offset!r}: give a period "
                                "of at least 1 and an offset below it")
        mixers = [FULL if i % period == offset else MAMBA for i in range(layers)]
        e_period, e_offset = cfg.get("expert_layer_period", 1), cfg.get("expert_layer_offset", 0)
        if not isinstance(e_period, int) or not isinstance(e_offset, int) or e_period < 1:
            raise ScheduleError(f"{where}: expert_layer_period {e_period!r}: give a whole number of at least 1")
        experts = (cfg.get("num_experts") or 1) > 1
        ffns = [MOE if experts and i % e_period == e_offset else DENSE for i in range(layers)]
        return LayerSchedule(tuple(mixers), tuple(ffns),
                             f"attention every {period} layers from {offset} (attn_layer_period/offset), Mamba between")
    types = cfg.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers:
            raise ScheduleError(f"{where}: layer_types must list one kind per layer ({layers} layers, "
                                f"num_hidden_layers); it has "
                                f"{len(types) if isinstance(types, list) else type(types).__name__}")
        unknown = sorted({str(t) for t in types} - set(LAYER_TYPE_VALUES))
        if unknown:
            raise ScheduleError(f"{where}: model type {model_type!r}: layer_types has {unknown}, which the layer "
                                f"schedule does not size; known kinds: {sorted(LAYER_TYPE_VALUES)}")
        mixers, source = [LAYER_TYPE_VALUES[t] for t in types], "layer_types"
    elif cfg.get("full_attention_interval") and "linear_num_value_heads" in cfg:  # early Qwen3-Next configs
        n = cfg["full_attention_interval"]
        mixers = [FULL if (i + 1) % n == 0 else LINEAR for i in range(layers)]
        source = f"full attention every {n} layers (full_attention_interval), Gated DeltaNet between"
    else:
        mixers, source = _sliding(cfg, model_type, layers)
    if SLIDING in mixers and not (isinstance(cfg.get("sliding_window"), int) and cfg["sliding_window"] > 0):
        raise ScheduleError(f"{where}: sliding layers need sliding_window, a positive whole number of tokens; "
                            f"it is {cfg.get('sliding_window')!r}")
    return LayerSchedule(tuple(mixers), tuple(_moe_ffns(cfg, layers, where)), source)


def _nemotron_h(cfg: dict, where: str) -> LayerSchedule:
    pattern = cfg.get("hybrid_override_pattern")
    if isinstance(pattern, str) and pattern:
        bad = sorted(set(pattern) - set(NEMOTRON_LETTERS))
        if bad:
            raise ScheduleError(f"{where}: hybrid_override_pattern has {bad}; known letters: M (Mamba), * (attention), "
                                "- (MLP), E (MoE)")
        kinds, source = [NEMOTRON_LETTERS[c] for c in pattern], f"hybrid_override_pattern {pattern}"
    elif isinstance(cfg.get("layers_block_type"), list) and cfg["layers_block_type"]:
        bad = sorted({str(t) for t in cfg["layers_block_type"]} - set(NEMOTRON_BLOCK_TYPES))
        if bad:
            raise ScheduleError(f"{where}: layers_block_type has {bad}; known: {sorted(NEMOTRON_BLOCK_TYPES)}")
        kinds, source = [NEMOTRON_BLOCK_TYPES[t] for t in cfg["layers_block_type"]], "layers_block_type"
    else:
        raise ScheduleError(f"{where}: a nemotron_h config needs hybrid_override_pattern (e.g. 'M-M*-'), one letter "
                            "per layer")
    return LayerSchedule(tuple(m for m, _ in kinds), tuple(f for _, f in kinds), source)


def mamba_state_elements(cfg: dict, where: str = "config") -> tuple[int, int]:
    """(SSM state, convolution state) elements per Mamba layer and sequence.

    Mamba (Jamba): d_inner = expand x hidden; SSM d_inner x d_state, convolution (d_conv - 1) x
    d_inner. Mamba-2 (Nemotron-H): d_inner = heads x head_dim; SSM d_inner x state size,
    convolution (kernel - 1) x (d_inner + 2 x groups x state size), the channels its conv1d runs on.
    """
    def need(key: str) -> int:
        v = cfg.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ScheduleError(f"{where}: Mamba layers need {key!r}, a whole number of at least 1; it is {v!r}")
        return v

    if cfg.get("model_type") == "nemotron_h":
        inner = need("mamba_num_heads") * need("mamba_head_dim")
        d_state, groups = need("ssm_state_size"), need("n_groups")
        return inner * d_state, (need("conv_kernel") - 1) * (inner + 2 * groups * d_state)
    inner = need("mamba_expand") * need("hidden_size")
    return inner * need("mamba_d_state"), (need("mamba_d_conv") - 1) * inner
