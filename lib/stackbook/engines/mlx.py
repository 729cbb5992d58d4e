"""MLX's server (`python -m mlx_lm server`, package mlx-lm) in its own environment under the cache.

Here it runs on MLX's CPU backend (`mlx[cpu]`); on a Mac the same adapter, the same flags and the
same request dialect serve the Metal backend (`pip install mlx mlx-lm` there, then point
`engine.python` at that environment). It loads the bf16 Hugging Face checkpoint directly, batches
up to --decode-concurrency sequences, keeps a prompt cache of whole sequences bounded by
--prompt-cache-size/--prompt-cache-bytes, and has no Prometheus endpoint and no KV pool: each
sequence's KV grows as it decodes, so there is no pool size to predict or to read back.
"""
from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path
from typing import ClassVar, Literal

import httpx
from pydantic import Field

from stackbook import sizing
from stackbook.engines.base import PythonEngineAdapter, chat_template_sha256
from stackbook.engines.capacity import capacity_limit, smallest_limit
from stackbook.engines.facts import DecisionFacts, ProcessRole, local_runner_reason
from stackbook.engines.install import (InstallContext, InstallFailed, fresh_venv, imports, log, mark_installed,
                                       pip_install)
from stackbook.engines.spec import CapacityBasis, PythonEngineSpec

MLX_VERSION = "0.32.4"
MLX_LM_VERSION = "0.32.2"
KV_STEP_TOKENS = 256  # mlx_lm's KVCache grows each sequence's buffers in steps of 256 tokens
# A logit bias this negative makes a token unreachable under any sampling setting.
FORBID = -1e9
# The server logs its prompt cache after each admitted request (server.py `_log_cache_stats`).
PROMPT_CACHE_LINE = r"Prompt Cache: (?P<sequences>\d+) sequences, (?P<gb>[\d.]+) GB"
# The dtypes an MLX checkpoint is served in; the KV cache takes the same dtype.
MLX_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def checkpoint_dtype(hf_dir: Path) -> str | None:
    """The precision a checkpoint's config.json states it is stored in (dtype, or the older
    torch_dtype); None when it states none the server knows."""
    try:
        cfg = json.loads((Path(hf_dir) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    names = {v: k for k, v in MLX_DTYPES.items()}
    return names.get(cfg.get("dtype") or cfg.get("torch_dtype"))


class MlxEngine(PythonEngineSpec):
    kind: Literal["mlx"]
    speculative_flags: ClassVar[tuple[str, ...]] = ("--draft-model", "--num-draft-tokens")
    managed_flags: ClassVar[dict[str, str]] = {
        "--model": "model (model.hf_path)", "--host": "engine.host (with engine.expose)", "--port": "engine.port",
        "--decode-concurrency": "engine.decode_concurrency", "--prompt-cache-size": "engine.prompt_cache_size",
        "--prompt-cache-bytes": "engine.prompt_cache_bytes"}
    decode_concurrency: int = Field(4, gt=0, description="--decode-concurrency: sequences decoded in one batch")
    prompt_cache_size: int | None = Field(None, ge=0, description="--prompt-cache-size: cached sequences "
                                          "(None: the engine's default, 10)")
    prompt_cache_bytes: int | None = Field(None, gt=0, description="--prompt-cache-bytes: bound on the prompt "
                                           "cache in bytes (None: unbounded)")

    def sequences_at_once(self) -> int:
        return self.decode_concurrency

    def configured_capacity(self, protocol) -> dict:
        return {"decode_concurrency": self.decode_concurrency,
                "context_per_sequence": "not enforced: mlx_lm has no context limit flag",
                "prompt_cache_size": self.prompt_cache_size if self.prompt_cache_size is not None
                else "engine default (10)",
                "prompt_cache_bytes": self.prompt_cache_bytes or "engine default (unbounded)"}

    def predicted_capacity(self, basis: CapacityBasis) -> dict:
        p = basis.protocol
        per_token = sizing.model_kv_bytes_per_token(basis.geometry, p.precision.kv_cache)
        cells = math.ceil(p.context_length / KV_STEP_TOKENS) * KV_STEP_TOKENS
        return {"max_concurrency": self.decode_concurrency,
                "kv_bytes_per_sequence_at_context": cells * per_token,
                "kv_bytes_all_sequences_at_context": cells * per_token * self.decode_concurrency,
                "rule": f"no KV pool: each of --decode-concurrency sequences grows its KV in "
                        f"{KV_STEP_TOKENS}-token steps up to the context"}


def eos_token_ids(hf_dir: Path) -> list[int]:
    """Every token id mlx_lm stops on: config.json's and generation_config.json's eos_token_id and
    the tokenizer's eos token, as mlx_lm's loader gathers them."""
    ids: set[int] = set()
    for name in ("config.json", "generation_config.json"):
        path = hf_dir / name
        if path.exists():
            value = json.loads(path.read_text()).get("eos_token_id")
            ids.update(value if isinstance(value, list) else [value] if value is not None else [])
    tc, tj = hf_dir / "tokenizer_config.json", hf_dir / "tokenizer.json"
    if tc.exists() and tj.exists():
        eos = json.loads(tc.read_text()).get("eos_token")
        eos = eos.get("content") if isinstance(eos, dict) else eos
        tok = json.loads(tj.read_text())
        ids.update(t["id"] for t in tok.get("added_tokens", []) if t.get("content") == eos)
        if eos in (tok.get("model", {}).get("vocab") or {}):
            ids.add(tok["model"]["vocab"][eos])
    return sorted(ids)


class MlxAdapter(PythonEngineAdapter):
    """On a Mac, engine.python names an environment with `mlx` and `mlx-lm` (Metal backend)."""
    spec_model = MlxEngine
    installs = "MLX (mlx[cpu] and mlx-lm) into its own environment"
    bootstrap_step = "mlx"
    env_name = f"mlx-{MLX_VERSION}"
    pinned_version = MLX_VERSION
    metrics_path = None  # mlx_lm's server answers /metrics with 404
    length_control = "logit_bias forbids the end-of-sequence tokens (mlx_lm has no ignore_eos or min_tokens)"
    process_roles = (ProcessRole(pattern=r"mlx_lm", role="mlx_lm_server", centre="compute",
                                 serves_http=True),)
    decision = DecisionFacts(stack="MLX")
    # MLX's CPU backend has its own bf16 and fp32 kernels on any x86 host; its fp16 decodes at less
    # than half their rate (2.6 against 6.5 tok/s on the AVX2 EPYC, benchmarks/native_precision.py).
    native_precisions = {"bf16": (), "fp32": ()}

    @classmethod
    def shortlist_reason(cls, answers) -> str | None:
        if answers.platform != "apple":
            return None
        return f"Apple silicon: the framework built for its unified memory; {local_runner_reason(answers)}"
    # A request that carries `seed` is not batchable in mlx_lm's server: it waits for the batch to
    # drain and runs alone. The seed is therefore not sent; greedy decoding does not need it.
    fields_not_sent: ClassVar[dict[str, str]] = {
        "seed": "mlx_lm serves a seeded request alone, outside the batch: sampling is unseeded"}

    def __init__(self, spec, artifacts, protocol, served_name, log_path=None):
        super().__init__(spec, artifacts, protocol, served_name, log_path)
        # mlx_lm's server reads a request's `model` as a path or Hub repository to load;
        # "default_model" names the checkpoint it was started with.
        self.served_name = "default_model"

    def command(self) -> list[str]:
        if self.artifacts is None or self.artifacts.hf_dir is None:
            raise FileNotFoundError("mlx needs a Hugging Face model directory: set model.hf_path")
        prec = self.protocol.precision
        if prec.weights not in MLX_DTYPES or prec.kv_cache != prec.weights:
            raise ValueError(
                f"mlx serves the checkpoint's own dtype and keeps KV in it: protocol.precision.weights must be "
                f"one of {sorted(MLX_DTYPES)} and precision.kv_cache the same (got weights={prec.weights!r}, "
                f"kv_cache={prec.kv_cache!r}); give mlx a checkpoint in that dtype")
        stated = checkpoint_dtype(self.artifacts.hf_dir)
        if stated is not None and stated != prec.weights:
            raise ValueError(
                f"mlx serves the checkpoint's own dtype, {stated} (its config.json), and has no flag to cast it: "
                f"protocol.precision.weights {prec.weights!r} would not be what it serves; give mlx a checkpoint "
                f"in {prec.weights} (model.hf_path), or name precision {stated}")
        s = self.spec
        cmd = [self.python, "-m", "mlx_lm", "server", "--model", str(self.artifacts.hf_dir),
               "--host", s.host, "--port", str(self.port), "--decode-concurrency", str(s.decode_concurrency)]
        if s.prompt_cache_size is not None:
            cmd += ["--prompt-cache-size", str(s.prompt_cache_size)]
        if s.prompt_cache_bytes is not None:
            cmd += ["--prompt-cache-bytes", str(s.prompt_cache_bytes)]
        return cmd + s.extra_args

    def env(self) -> dict[str, str]:
        # Offline, and the log line by line as it is written.
        return {"HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}

    def sampling_fields(self, decoding: dict) -> dict:
        return {k: v for k, v in super().sampling_fields(decoding).items() if k not in self.fields_not_sent}

    def output_length_fields(self, n: int) -> dict:
        ids = eos_token_ids(self.artifacts.hf_dir) if self.artifacts and self.artifacts.hf_dir else []
        return {"max_tokens": n, "logit_bias": {str(i): FORBID for i in ids}}

    def _ready_extra(self, client: httpx.Client) -> bool:
        # /health answers 200 while the model is still loading: one generated token proves it is loaded.
        try:
            r = client.post(self.base_url + "/v1/chat/completions", timeout=max(30.0, self.spec.startup_timeout_s),
                            json={"model": "default_model", "max_tokens": 1, "temperature": 0.0,
                                  "messages": [{"role": "user", "content": "Hi"}]})
        except httpx.HTTPError:
            return False
        return r.status_code == 200

    def reset_prefix_cache(self, client: httpx.Client) -> str:
        size = self.spec.prompt_cache_size if self.spec.prompt_cache_size is not None else 10
        return (f"not offered: mlx_lm's server has no flush endpoint; its prompt cache keeps up to {size} "
                "sequences (engine.prompt_cache_size, 0 keeps none)")

    def versions(self) -> dict:
        code = ("import importlib.metadata as m, mlx.core as mx; "
                "print(m.version('mlx'), m.version('mlx-lm'), mx.default_device())")
        try:
            out = subprocess.run([self.python, "-c", code], capture_output=True, text=True, timeout=60).stdout.split()
        except (OSError, subprocess.TimeoutExpired, FileNotFoundError):
            out = []
        return {"mlx": out[0] if out else "unknown", "mlx_lm": out[1] if len(out) > 1 else "unknown",
                "device": " ".join(out[2:]) or "unknown"}

    def identity(self) -> dict:
        v = self.versions()
        return {"engine": "MLX (mlx_lm server)", "version": f"mlx {v['mlx']}, mlx-lm {v['mlx_lm']}", **v,
                "backend": "CPU (mlx[cpu])" if "cpu" in v["device"] else v["device"],
                "chat_template_sha256": chat_template_sha256(self.artifacts.hf_dir if self.artifacts else None),
                "decode_concurrency": self.spec.decode_concurrency,
                "request_fields_not_sent": self.fields_not_sent}

    def realized_capacity(self) -> dict:
        out: dict = {"source": "mlx_lm server log",
                     "kv_pool": "none reported: mlx_lm allocates each sequence's KV as it grows",
                     "decode_concurrency": "not reported by the engine (set by --decode-concurrency)"}
        caches = [m for line in self.log_lines if (m := re.search(PROMPT_CACHE_LINE, line))]
        if caches:
            out["prompt_cache_sequences"] = int(caches[-1]["sequences"])
            out["prompt_cache_gb_max"] = max(float(m["gb"]) for m in caches)
        # mlx_lm states none of its limits: they are listed with the configured values, and no
        # realized concurrency is claimed.
        return out | smallest_limit({
            "sequence_cap": capacity_limit(None, self.spec.decode_concurrency, "mlx_lm logs no --decode-concurrency"),
            "kv_blocks": capacity_limit(None, "no pool: KV grows per sequence", "mlx_lm reports no KV pool"),
            "context": capacity_limit(None, "not enforced", "mlx_lm has no context limit",
                                      unit="tokens per sequence")})

    # -- set-up -----------------------------------------------------------------------------
    install_label = "MLX install"

    @classmethod
    def install(cls, ctx: InstallContext) -> None:
        """mlx with its CPU backend and mlx-lm; the same packages serve a Mac with the Metal
        backend (`pip install mlx mlx-lm` there)."""
        log(f"MLX (CPU backend): installing mlx {MLX_VERSION} and mlx-lm {MLX_LM_VERSION} into their own "
            "environment (about 355 MB)")
        python = fresh_venv(ctx, cls.install_dir())
        pip_log = ctx.pip_log("mlx")
        pip_install(pip_log, [str(python), "-m", "pip", "install", "-q", f"mlx[cpu]=={MLX_VERSION}",
                              f"mlx-lm=={MLX_LM_VERSION}"])
        if not imports(python, "import mlx.core, mlx_lm.server"):
            raise InstallFailed(f"MLX install failed; see {pip_log}")
        mark_installed(cls.install_dir())
