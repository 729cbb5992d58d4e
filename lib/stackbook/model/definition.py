"""Parameter counts from the model's own definition: transformers builds the architecture on the
meta device from its config (no weights, no memory), and its parameters are counted by part.
torch and transformers are imported here only, when a count is asked for, so nothing else (the
load generator above all) pays for their import. What they answer is a pure function of the
config and their versions, so it is kept on disk (`$STACKBOOK_CACHE/definitions/`): every
notebook kernel and `stackbook run` after the first reads it back instead of importing them
(seconds each)."""
from __future__ import annotations

import hashlib
import json
import os
import warnings
from functools import lru_cache
from importlib import metadata

from stackbook.locations import cache_dir


class DefinitionError(ValueError):
    pass


@lru_cache(maxsize=8)
def _versions(*packages: str) -> str | None:
    try:
        return " ".join(f"{p} {metadata.version(p)}" for p in packages)
    except metadata.PackageNotFoundError:
        return None


def _remembered(kind: str, key: str, packages: tuple[str, ...], compute):
    """compute(), kept on disk under the key and the versions of the packages that answer it; a
    failure (DefinitionError) is never kept."""
    versions = _versions(*packages)
    if versions is None:
        return compute()
    digest = hashlib.sha256(f"{kind}\n{versions}\n{key}".encode()).hexdigest()[:32]
    path = cache_dir() / "definitions" / f"{kind}-{digest}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    value = compute()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(value))
        os.replace(tmp, path)
    except OSError:  # a read-only cache costs time, not correctness
        pass
    return value


def transformers_knows(model_type: str) -> bool:
    return bool(_remembered("knows", model_type, ("transformers",), lambda: _knows(model_type)))


def _knows(model_type: str) -> bool:
    try:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    except ImportError:
        return False
    return model_type in CONFIG_MAPPING_NAMES and model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES


def normalized_config(cfg: dict, where: str = "config") -> dict:
    """The config as the model's own config class reads it: its defaults filled in and the keys it
    derives (layer_types above all) set; the dict unchanged where transformers does not know it."""
    model_type = cfg.get("model_type")
    if not isinstance(model_type, str) or not transformers_knows(model_type):
        return cfg
    cfg_json = json.dumps(cfg, sort_keys=True, default=str)
    return {**cfg,
            **json.loads(_remembered("config", cfg_json, ("transformers",), lambda: _normalize(cfg_json, where)))}


@lru_cache(maxsize=64)
def _normalize(cfg_json: str, where: str) -> str:
    config = _config(cfg_json, where)
    return json.dumps(config.to_dict(), default=str)


def _config(cfg_json: str, where: str):
    from transformers import AutoConfig
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    cfg = json.loads(cfg_json)
    cfg.pop("quantization_config", None)  # the architecture, not a quantizer's packing
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    except Exception as err:  # transformers' own checks of a config: report them, whatever their class
        raise DefinitionError(f"{where}: transformers' {config_name(cfg_json)} config class refuses this config: "
                              f"{type(err).__name__}: {str(err)[:300]}; correct the field it names") from None


def count_parameters(cfg: dict, where: str = "config") -> dict | None:
    """Total, active per token, embedding and head parameters of the causal LM transformers builds
    from `cfg`; None when transformers is absent or does not know the model type."""
    model_type = cfg.get("model_type")
    if not isinstance(model_type, str) or not transformers_knows(model_type):
        return None
    cfg_json = json.dumps(cfg, sort_keys=True, default=str)
    return dict(_remembered("parameters", cfg_json, ("transformers", "torch"),
                            lambda: [list(kv) for kv in _count(cfg_json, where)]))


@lru_cache(maxsize=32)
def _count(cfg_json: str, where: str) -> tuple:
    import torch
    from transformers import AutoModelForCausalLM

    config = _config(cfg_json, where)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.device("meta"):
                model = AutoModelForCausalLM.from_config(config)
    except Exception as err:  # transformers' own checks of a config: report them, whatever their class
        raise DefinitionError(f"{where}: transformers could not build {config_name(cfg_json)} from this config: "
                              f"{type(err).__name__}: {str(err)[:300]}; correct the config field it names") from None
    params = dict(model.named_parameters())  # tied tensors appear once
    total = sum(p.numel() for p in params.values())
    embed = model.get_input_embeddings()
    head = model.get_output_embeddings()
    tied = head is not None and embed is not None and head.weight is embed.weight
    experts = sum(p.numel() for name, p in params.items() if ".experts." in name)
    n_experts = _first(config, "num_experts", "n_routed_experts", "num_local_experts")
    top_k = _first(config, "num_experts_per_tok", "num_experts_per_token")
    active = total - experts + (experts * top_k // n_experts if experts and n_experts and top_k else experts)
    return (("total", total), ("active", active),
            ("embeddings", embed.weight.numel() if embed is not None else 0),
            ("lm_head", 0 if tied or head is None else head.weight.numel()), ("tied_head", tied),
            ("expert_mlp", experts), ("model_class", type(model).__name__),
            ("source", f"transformers {_version()} {type(model).__name__} built on the meta device"))


def _first(config, *names):
    for n in names:
        v = getattr(config, n, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def config_name(cfg_json: str) -> str:
    return repr(json.loads(cfg_json).get("model_type"))


def _version() -> str:
    import transformers
    return transformers.__version__
