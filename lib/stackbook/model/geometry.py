"""Model geometry (layers, heads, KV-keeping layers, recurrent state, parameters) from the catalog,
a Hugging Face config.json or a GGUF's metadata."""
from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from stackbook.locations import DATA_DIR, symbolic

# --------------------------------------------------------------------------- geometry

@dataclass(frozen=True)
class ModelGeometry:
    """What the memory arithmetic needs to know about a decoder.

    Layers are of three kinds: full attention (KV grows with the context), sliding-window
    attention (KV capped at the window) and linear attention / Gated DeltaNet (a fixed
    recurrent state per sequence, no KV). MLA keeps one compressed latent per token and layer.
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
    state_dtype: str | None = None               # the config's own choice (mamba_ssm_dtype)
    kv_lora_rank: int | None = None              # MLA
    qk_rope_head_dim: int | None = None
    num_experts: int | None = None
    experts_per_token: int | None = None
    source: str = ""

    @property
    def kv_layers(self) -> int:
        return self.num_layers if self.full_attention_layers is None else self.full_attention_layers

    @property
    def is_hybrid(self) -> bool:
        return self.linear_layers > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None


def _layer_counts(cfg: dict, layers: int) -> tuple[int, int, int]:
    """(full attention, sliding window, linear attention) layer counts."""
    types = cfg.get("layer_types")
    if types:
        full = sum(t in ("full_attention", "attention") for t in types)
        sliding = sum(t in ("sliding_attention", "sliding_window_attention") for t in types)
        linear = sum(t in ("linear_attention", "mamba", "gated_deltanet") for t in types)
        return full, sliding, linear
    interval = cfg.get("full_attention_interval")
    if interval and "linear_num_value_heads" in cfg:
        full = layers // interval
        return full, 0, layers - full
    return layers, 0, 0


def geometry_from_config(cfg: dict, name: str = "", where: str = "config", num_parameters: int | None = None,
                         active_parameters: int | None = None, source: str = "") -> ModelGeometry:
    """Geometry from a Hugging Face config dictionary (text_config of a multimodal model too)."""
    cfg = cfg.get("text_config", cfg)

    def need(key: str):
        if key not in cfg:
            raise KeyError(f"{where}: config has no {key!r}, which the sizing arithmetic needs; add it to the config")
        return cfg[key]

    heads = need("num_attention_heads")
    hidden = need("hidden_size")
    layers = need("num_hidden_layers")
    full, sliding, linear = _layer_counts(cfg, layers)
    return ModelGeometry(
        name=name or cfg.get("_name_or_path") or "model",
        architecture=(cfg.get("architectures") or [cfg.get("model_type", "unknown")])[0],
        num_layers=layers, hidden_size=hidden, num_attention_heads=heads,
        num_kv_heads=cfg.get("num_key_value_heads", heads),
        head_dim=cfg.get("head_dim") or hidden // heads,
        vocab_size=need("vocab_size"),
        max_context=cfg.get("max_position_embeddings", 0),
        num_parameters=num_parameters, active_parameters=active_parameters,
        full_attention_layers=full, sliding_layers=sliding,
        sliding_window=cfg.get("sliding_window") if sliding else None,
        linear_layers=linear,
        linear_num_key_heads=cfg.get("linear_num_key_heads", 0),
        linear_num_value_heads=cfg.get("linear_num_value_heads", 0),
        linear_key_head_dim=cfg.get("linear_key_head_dim", 0),
        linear_value_head_dim=cfg.get("linear_value_head_dim", 0),
        linear_conv_kernel=cfg.get("linear_conv_kernel_dim", 0),
        state_dtype={"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}.get(cfg.get("mamba_ssm_dtype", ""))
        if linear else None,
        kv_lora_rank=cfg.get("kv_lora_rank"), qk_rope_head_dim=cfg.get("qk_rope_head_dim"),
        num_experts=cfg.get("num_experts") or cfg.get("n_routed_experts") or cfg.get("num_local_experts"),
        experts_per_token=cfg.get("num_experts_per_tok"),
        source=source,
    )


def geometry_from_hf_config(path: str | os.PathLike) -> ModelGeometry:
    """Read a Hugging Face config.json (a file or its directory). The parameter count comes from
    the safetensors headers beside it when they are there."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    if not p.exists():
        raise FileNotFoundError(f"{symbolic(p)} does not exist; give a config.json, a model directory or a .gguf")
    n_params = _safetensors_parameters(p.parent)
    cfg = json.loads(p.read_text())
    active, source = None, symbolic(p)
    if n_params is None:  # a bare config.json: count the parameters from its geometry
        from stackbook.model.parameters import parameters_from_config
        try:
            counted = parameters_from_config(cfg)
        except KeyError as err:
            raise KeyError(f"{symbolic(p)}: no weights beside it and the config has no {err}, which counting "
                           "the parameters from its geometry needs; add it, or give --artifact-bytes") from None
        n_params, source = counted["total"], f"{symbolic(p)} (parameters counted from the geometry, no weights)"
        active = counted["active"] if counted["active"] != counted["total"] else None
    return geometry_from_config(cfg, name=p.parent.name, where=symbolic(p),
                                num_parameters=n_params, active_parameters=active, source=source)


def _safetensors_parameters(directory: Path) -> int | None:
    """Count parameters from safetensors headers (8-byte length + JSON), without loading weights."""
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for f in files:
        with open(f, "rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            header = json.loads(fh.read(n))
        for key, t in header.items():
            if key != "__metadata__":
                count = 1
                for d in t["shape"]:
                    count *= d
                total += count
    return total


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
