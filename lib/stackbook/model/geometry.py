"""Model geometry (layers, heads, KV-keeping layers, recurrent state, parameters) from the catalog,
a Hugging Face config.json or a GGUF's metadata."""
from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml

from stackbook.locations import DATA_DIR, symbolic
from stackbook.model.checkpoint import indexed_bytes, safetensors_totals, shipped_precision
from stackbook.model.definition import count_parameters, normalized_config
from stackbook.model.parameters import parameters_from_config
from stackbook.model.schedule import FULL, LINEAR, MAMBA, SLIDING, mamba_state_elements, schedule_from_config

# --------------------------------------------------------------------------- geometry

@dataclass(frozen=True)
class ModelGeometry:
    """What the memory arithmetic needs to know about a decoder.

    Layers are of four kinds (the layer schedule): full attention (KV grows with the context),
    sliding-window attention (KV capped at the window), linear attention / Gated DeltaNet and Mamba
    (a fixed recurrent state per sequence, no KV). MLA keeps one compressed latent per token and layer.
    """
    name: str
    architecture: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    max_context: int
    num_parameters: int | None = None
    active_parameters: int | None = None
    full_attention_layers: int | None = None     # None: every layer keeps full KV
    sliding_layers: int = 0
    sliding_window: int | None = None
    linear_layers: int = 0
    linear_num_key_heads: int = 0
    linear_num_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel: int = 0
    mamba_layers: int = 0
    mamba_ssm_elements: int = 0                  # per Mamba layer and sequence
    mamba_conv_elements: int = 0
    state_dtype: str | None = None               # the config's own choice (mamba_ssm_dtype)
    kv_lora_rank: int | None = None              # MLA
    qk_rope_head_dim: int | None = None
    num_experts: int | None = None
    experts_per_token: int | None = None
    layer_counts: dict = field(default_factory=dict, hash=False, compare=False)
    parameters_source: str = ""
    parameter_parts: dict = field(default_factory=dict, hash=False, compare=False)  # embeddings, head, experts
    shipped_precision: str | None = None         # from quantization_config
    precision_source: str = ""
    checkpoint_bytes: int | None = None          # the safetensors as shipped
    source: str = ""

    @property
    def kv_layers(self) -> int:
        return self.num_layers if self.full_attention_layers is None else self.full_attention_layers

    @property
    def state_layers(self) -> int:
        return self.linear_layers + self.mamba_layers

    @property
    def is_hybrid(self) -> bool:
        return self.state_layers > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None


DTYPE_NAMES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def _whole(cfg: dict, key: str, where: str, minimum: int = 1, default=None):
    """A config field that must be a whole number of at least `minimum`, named when it is not."""
    if key not in cfg or cfg[key] is None:
        if default is not None:
            return default
        raise KeyError(f"{where}: config has no {key!r}, which the sizing arithmetic needs; add it to the config")
    v = cfg[key]
    if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
        raise ValueError(f"{where}: config field {key!r} is {v!r}; it must be a whole number of at least {minimum}")
    return v


def geometry_from_config(cfg: dict, name: str = "", where: str = "config", num_parameters: int | None = None,
                         active_parameters: int | None = None, source: str = "", count: bool = True,
                         checkpoint_bytes: int | None = None, parameters_source: str = "",
                         checkpoint_parameters: dict | None = None) -> ModelGeometry:
    """Geometry from a Hugging Face config dictionary (text_config of a multimodal model too).
    Without a given count, the parameters are counted from transformers' own definition of the
    architecture, else taken from the checkpoint's tensors (`checkpoint_parameters`: parameters and
    source), else estimated from the config (and labelled so)."""
    if not isinstance(cfg, dict):
        raise ValueError(f"{where}: a config must be a JSON object of fields, not a {type(cfg).__name__}")
    outer = cfg
    cfg = cfg["text_config"] if cfg.get("text_config") is not None else cfg
    if not isinstance(cfg, dict):
        raise ValueError(f"{where}: text_config must be a JSON object of fields")
    heads = _whole(cfg, "num_attention_heads", where)
    hidden = _whole(cfg, "hidden_size", where)
    vocab = _whole(cfg, "vocab_size", where)
    pattern = cfg.get("hybrid_override_pattern") or cfg.get("layers_block_type")
    layers = _whole(cfg, "num_hidden_layers", where,
                    default=len(pattern) if isinstance(pattern, (str, list)) and pattern else None)
    # A config counted here is read as its own config class reads it (defaults, derived layer_types);
    # the fields above stay the file's own. A catalog entry, counted already, is read as written.
    raw, cfg = cfg, normalized_config(cfg, where) if num_parameters is None and count else cfg
    kv_heads = _whole(cfg, "num_key_value_heads", where, default=heads)
    if heads % kv_heads:
        raise ValueError(f"{where}: num_attention_heads {heads} is not a multiple of num_key_value_heads {kv_heads}; "
                         "each KV head serves a whole group of query heads")
    head_dim = _whole(cfg, "head_dim", where, default=max(1, hidden // heads))
    max_context = _whole(cfg, "max_position_embeddings", where, minimum=0, default=0)
    sched = schedule_from_config(cfg, layers, where)
    if len(sched.mixers) != layers:
        raise ValueError(f"{where}: the layer pattern ({sched.source}) has {len(sched.mixers)} layers but "
                         f"num_hidden_layers is {layers}; make them agree")
    linear, mamba = sched.count(LINEAR), sched.count(MAMBA)
    ssm, conv = mamba_state_elements(cfg, where) if mamba else (0, 0)
    linear_fields = {k: _whole(cfg, k, where) if linear else 0 for k in
                     ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim")}
    prec, prec_source = shipped_precision(outer if "quantization_config" in outer else cfg, where)
    experts = _whole(cfg, "num_experts", where, 0, 0) or _whole(cfg, "n_routed_experts", where, 0, 0) or \
        _whole(cfg, "num_local_experts", where, 0, 0) or None
    mla_rank = _whole(cfg, "kv_lora_rank", where) if cfg.get("kv_lora_rank") is not None else None
    if num_parameters is None and count:
        num_parameters, active_parameters, parameters_source, parts = _count(raw, where, mamba, checkpoint_parameters)
    else:
        parts = {}
    state_key = cfg.get("mamba_ssm_dtype") or cfg.get("mamba_ssm_cache_dtype") or ""
    return ModelGeometry(
        name=name or cfg.get("_name_or_path") or "model",
        architecture=(outer.get("architectures") or [cfg.get("model_type", "unknown")])[0],
        num_layers=layers, hidden_size=hidden, num_attention_heads=heads, num_kv_heads=kv_heads,
        head_dim=head_dim, vocab_size=vocab, max_context=max_context,
        num_parameters=num_parameters, active_parameters=active_parameters,
        full_attention_layers=sched.count(FULL), sliding_layers=sched.count(SLIDING),
        sliding_window=cfg.get("sliding_window") if sched.count(SLIDING) else None,
        linear_layers=linear, **linear_fields,
        linear_conv_kernel=_whole(cfg, "linear_conv_kernel_dim", where, default=4) if linear else 0,
        mamba_layers=mamba, mamba_ssm_elements=ssm, mamba_conv_elements=conv,
        state_dtype=DTYPE_NAMES.get(str(state_key)) if linear or mamba else None,
        kv_lora_rank=mla_rank, qk_rope_head_dim=_whole(cfg, "qk_rope_head_dim", where, 0) if mla_rank else None,
        num_experts=experts, experts_per_token=cfg.get("num_experts_per_tok"),
        layer_counts=sched.counts(), parameters_source=parameters_source or source, parameter_parts=parts,
        shipped_precision=prec, precision_source=prec_source, checkpoint_bytes=checkpoint_bytes,
        source=source,
    )


def _count(cfg: dict, where: str, mamba_layers: int, checkpoint: dict | None) -> tuple[int, int | None, str, dict]:
    """(total, active or None, how, parts) from transformers' definition, else the checkpoint's
    tensors, else the config estimate."""
    counted = count_parameters(cfg, where)
    if counted is not None:
        active = counted["active"] if counted["active"] != counted["total"] else None
        parts = {k: counted[k] for k in ("embeddings", "lm_head", "tied_head", "expert_mlp")}
        return counted["total"], active, counted["source"], parts
    if checkpoint:
        return checkpoint["parameters"], None, checkpoint["source"], {}
    if mamba_layers:
        raise ValueError(f"{where}: counting a Mamba hybrid's parameters needs transformers' definition of "
                         f"{cfg.get('model_type')!r} (pip install transformers), or give --artifact-bytes")
    try:
        est = parameters_from_config(cfg)
    except KeyError as err:
        raise KeyError(f"{where}: transformers does not know model type {cfg.get('model_type')!r} and the config has "
                       f"no {err}, which estimating the parameters from its geometry needs; add it") from None
    active = est["active"] if est["active"] != est["total"] else None
    return (est["total"], active, "estimate from the config's geometry (transformers does not know this architecture)",
            est["parts"])


def geometry_from_hf_config(path: str | os.PathLike) -> ModelGeometry:
    """Read a Hugging Face config.json (a file or its directory). The parameter count comes from
    transformers' definition, else the safetensors headers beside it, else the config estimate;
    the checkpoint's exact bytes from those headers (or its index)."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    if not p.exists():
        raise FileNotFoundError(f"{symbolic(p)} does not exist; give a config.json, a model directory or a .gguf")
    try:
        cfg = json.loads(p.read_text())
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"{symbolic(p)} is not valid JSON ({err}); give the model's config.json") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"{symbolic(p)}: a config must be a JSON object of fields, not a {type(cfg).__name__}")
    shipped = safetensors_totals(p.parent)
    checkpoint = shipped["bytes"] if shipped else indexed_bytes(p.parent)
    return geometry_from_config(cfg, name=p.parent.name, where=symbolic(p), source=symbolic(p),
                                checkpoint_bytes=checkpoint, checkpoint_parameters=shipped)


def geometry_from_gguf(path: str | os.PathLike) -> ModelGeometry:
    """Read GGUF metadata (any architecture llama.cpp writes with the standard keys)."""
    from gguf import GGUFReader

    if not Path(path).exists():
        raise FileNotFoundError(f"{symbolic(path)} does not exist")
    r = GGUFReader(str(path))

    def field(key: str, default=None):
        f = r.fields.get(key)
        if f is None:
            if default is None:
                raise KeyError(f"{symbolic(path)}: GGUF metadata has no {key!r}, which the sizing arithmetic needs")
            return default
        val = f.parts[f.data[0]]
        if f.types and f.types[0].name == "STRING":
            return bytes(val).decode()
        return val.tolist()[0] if hasattr(val, "tolist") else val

    arch = field("general.architecture")
    # GGUF metadata gives one layer kind; a model whose layers differ is sized from its config.json.
    mixed = sorted(k for k in r.fields if k.startswith((f"{arch}.ssm.", f"{arch}.attention.sliding_window",
                                                        f"{arch}.full_attention_interval")))
    if mixed:
        raise ValueError(f"{symbolic(path)}: GGUF architecture {arch!r} has {mixed[0]!r}: its layers are not all "
                         "full attention, which GGUF sizing assumes; give the model's config.json (or its Hugging "
                         "Face directory) instead")
    heads = int(field(f"{arch}.attention.head_count"))
    hidden = int(field(f"{arch}.embedding_length"))
    kv_heads = int(field(f"{arch}.attention.head_count_kv", heads))
    head_dim = int(field(f"{arch}.attention.key_length", hidden // heads))
    n_params = sum(int(t.n_elements) for t in r.tensors)
    vocab = field(f"{arch}.vocab_size", -1)
    if vocab == -1:
        tok = r.fields.get("tokenizer.ggml.tokens")
        vocab = len(tok.data) if tok is not None else 0
    layers = int(field(f"{arch}.block_count"))
    return ModelGeometry(
        name=field("general.name", Path(path).stem), architecture=arch,
        num_layers=layers, hidden_size=hidden,
        num_attention_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
        vocab_size=int(vocab), max_context=int(field(f"{arch}.context_length", 0)),
        num_parameters=n_params, full_attention_layers=layers, source=symbolic(path),
    )


@lru_cache(maxsize=1)
def model_catalog() -> dict[str, dict]:
    return yaml.safe_load((DATA_DIR / "models.yaml").read_text())


def geometry_for(model: str | os.PathLike) -> ModelGeometry:
    """A catalog name (e.g. qwen3.8-27b), or a path to config.json, a model directory or a .gguf."""
    key = str(model)
    cat = model_catalog()
    if key in cat:
        e = cat[key]
        return geometry_from_config(e["config"], name=key, where=f"catalog entry {key}",
                                    num_parameters=e.get("num_parameters"),
                                    active_parameters=e.get("active_parameters"), source=e["source"])
    p = Path(key).expanduser()
    if p.suffix == ".gguf":
        return geometry_from_gguf(p)
    if p.exists():
        return geometry_from_hf_config(p)
    close = difflib.get_close_matches(key, list(cat), n=3, cutoff=0.4)
    raise KeyError(f"unknown model {key!r}: not in the catalog and no such path. Close matches: "
                   f"{close or 'none'}. Catalog: {', '.join(sorted(cat))}")
