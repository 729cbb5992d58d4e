"""Hugging Face Transformers' own server (`transformers serve`, OpenAI-compatible), in its own
environment under the cache: the reference implementation the sizing's worked example names,
serving the bf16 checkpoint through plain PyTorch.

Here it runs on the CPU (torch's +cpu build); on a CUDA machine the same kind, flags and request
dialect run on the GPU (`device: auto` picks it), with only torch and transformers installed.
With `continuous_batching` it schedules requests into a paged KV cache sized at start from free
memory (or `cb_num_blocks` x `cb_block_size`); without it each request runs its own `generate`.

Its request dialect is narrower than the OpenAI schema's extensions: fields outside the schema
(top_k, min_p, repetition_penalty) are refused with HTTP 422, and `logit_bias` fails. Every
decoding setting therefore travels in the one field it reads whole, `generation_config` (a JSON
GenerationConfig), and an exact output length is an end-of-sequence id no token has (-1).
Under continuous batching its scheduler takes each request's length and end-of-sequence ids but
samples with the first request's settings (its own documented limit); the protocol's decoding is
the same for every request, so that holds the protocol.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import ClassVar, Literal

import httpx
from pydantic import Field

from stackbook import sizing
from stackbook.engines.base import PythonEngineAdapter, chat_template_sha256
from stackbook.engines.capacity import capacity_limit, smallest_limit
from stackbook.engines.facts import ProcessRole
from stackbook.engines.install import (InstallContext, InstallFailed, fresh_venv, imports, log, mark_installed,
                                      pip_install, torch_cpu_index)
from stackbook.engines.spec import CapacityBasis, PythonEngineSpec
from stackbook.locations import cache_dir

TRANSFORMERS_VERSION = "5.24.0"
TORCH_PIN = "torch==2.13.0+cpu"  # PyPI's own torch is a CUDA build; a CUDA host names its own engine.python
# The torch dtype names `--dtype` takes, by the protocol's precision names.
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
# An end-of-sequence id no token has: generation runs to max_new_tokens (an exact length).
NO_EOS = -1
# The decoding settings GenerationConfig names as the protocol does.
GENERATION_FIELDS = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")
# Asked of the engine's own interpreter: its versions, the device `auto` takes, and the attention
# the library picks for this checkpoint (a model built on the meta device: no weights are read).
ENGINE_PROBE = """
import importlib.metadata as m, json, sys, torch, transformers as t
from transformers.utils import is_flash_attn_2_available
path, asked = sys.argv[1], sys.argv[2] or None
out = {"transformers": m.version("transformers"), "torch": torch.__version__,
       "device": "cuda" if torch.cuda.is_available() else "cpu", "flash_attention": is_flash_attn_2_available()}
try:
    with torch.device("meta"):
        model = t.AutoModelForCausalLM.from_config(t.AutoConfig.from_pretrained(path), attn_implementation=asked)
    out["attention"] = model.config._attn_implementation
except Exception as err:
    out["attention_error"] = str(err)[:300]
print(json.dumps(out))
"""


class TransformersEngine(PythonEngineSpec):
    kind: Literal["transformers"]
    managed_flags: ClassVar[dict[str, str]] = {
        "--host": "engine.host (with engine.expose)", "--port": "engine.port",
        "--dtype": "protocol.precision.weights", "--device": "engine.device",
        "--continuous-batching": "engine.continuous_batching", "--no-continuous-batching": "engine.continuous_batching",
        "--attn-implementation": "engine.attn_implementation", "--cb-num-blocks": "engine.cb_num_blocks",
        "--cb-block-size": "engine.cb_block_size"}
    pool_set_by: ClassVar[tuple[str, ...]] = ("engine.cb_num_blocks", "engine.cb_block_size")
    device: str = Field("auto",
                        description="--device: auto (a CUDA GPU where torch sees one, else the CPU), cpu, cuda:0")
    continuous_batching: bool = Field(True, description="--continuous-batching: a paged KV cache and one batch for "
                                      "every request in flight (False: each request its own generate call)")
    attn_implementation: str | None = Field(None, description="--attn-implementation (None: the library's choice)")
    cb_num_blocks: int | None = Field(None, gt=0, description="--cb-num-blocks: KV blocks of the paged cache "
                                      "(None: sized at start from free memory)")
    cb_block_size: int | None = Field(None, gt=0,
                                      description="--cb-block-size: tokens per KV block (None: the library's)")

    def configured_capacity(self, protocol) -> dict:
        return {"continuous_batching": self.continuous_batching,
                "cb_num_blocks": self.cb_num_blocks or "engine default (sized from free memory)",
                "cb_block_size": self.cb_block_size or "engine default",
                "context_per_sequence": "not enforced: transformers serve has no context limit flag"}

    def cache_pool_bytes(self) -> float | None:
        return None  # the blocks' bytes depend on the model: predicted_capacity computes them

    def predicted_capacity(self, basis: CapacityBasis) -> dict:
        p = basis.protocol
        per_token = sizing.model_kv_bytes_per_token(basis.geometry, p.precision.kv_cache)
        if not self.continuous_batching:
            return {"max_concurrency": None, "kv_bytes_per_sequence_at_context": p.context_length * per_token,
                    "rule": "no pool: each request's generate call grows its own KV cache; nothing caps the "
                            "requests served at once"}
        if self.cb_num_blocks and self.cb_block_size:
            tokens = self.cb_num_blocks * self.cb_block_size
            return {"max_concurrency": tokens // p.context_length, "kv_pool_tokens": tokens,
                    "kv_pool_bytes": tokens * per_token,
                    "rule": "paged cache of cb_num_blocks x cb_block_size tokens, divided by the context"}
        return {"max_concurrency": None, "kv_bytes_per_token": per_token,
                "rule": "paged cache sized at start from the memory free then (not predictable from the campaign); "
                        "transformers serve does not log its size either"}


def served_model_dir(hf_dir: Path, served_name: str) -> Path:
    """A folder holding a link named `served_name` to the checkpoint: the server is started there
    with that relative name, so requests name the model as the campaign does, and no machine path
    travels in a request body."""
    home = cache_dir() / "served" / hashlib.sha256(str(hf_dir).encode()).hexdigest()[:12]
    link = home / served_name
    if not link.is_symlink() or link.resolve() != hf_dir.resolve():
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink():
            link.unlink()
        link.symlink_to(hf_dir.resolve(), target_is_directory=True)
    return home


class TransformersAdapter(PythonEngineAdapter):
    """`python -m transformers.cli.transformers serve NAME`, started in the folder where NAME links
    to the checkpoint."""
    spec_model = TransformersEngine
    installs = f"transformers {TRANSFORMERS_VERSION} with its server and torch (+cpu) into its own environment"
    bootstrap_step = "transformers"
    setup_target = "test"
    env_name = f"transformers-{TRANSFORMERS_VERSION}"
    pinned_version = TRANSFORMERS_VERSION
    distributions = ("transformers", "torch")
    runs_on = "this CPU, or a CUDA GPU (`device: auto`)"
    metrics_path = None  # the server exports no Prometheus metrics
    length_control = "generation_config with an end-of-sequence id no token has (-1), up to max_tokens"
    process_roles = (ProcessRole(pattern=r"transformers(\.cli\.transformers)? serve", role="transformers_serve",
                                 centre="compute", serves_http=True),)
    fields_not_sent: ClassVar[dict[str, str]] = {}

    def _checkpoint(self) -> Path:
        if self.artifacts is None or self.artifacts.hf_dir is None:
            raise FileNotFoundError("transformers needs a Hugging Face model directory: set model.hf_path")
        return Path(self.artifacts.hf_dir)

    def cwd(self) -> Path:
        return served_model_dir(self._checkpoint(), self.served_name)

    def command(self) -> list[str]:
        self._checkpoint()
        prec = self.protocol.precision
        if prec.weights not in DTYPES or prec.kv_cache != prec.weights:
            raise ValueError(
                f"transformers serves the weights in one torch dtype and keeps KV in it: protocol.precision.weights "
                f"must be one of {sorted(DTYPES)} and precision.kv_cache the same (got weights={prec.weights!r}, "
                f"kv_cache={prec.kv_cache!r})")
        s = self.spec
        cmd = [self.python, "-m", "transformers.cli.transformers", "serve", self.served_name,
               "--host", s.host, "--port", str(self.port), "--device", s.device, "--dtype", DTYPES[prec.weights],
               "--continuous-batching" if s.continuous_batching else "--no-continuous-batching"]
        if s.attn_implementation:
            cmd += ["--attn-implementation", s.attn_implementation]
        if s.cb_num_blocks:
            cmd += ["--cb-num-blocks", str(s.cb_num_blocks)]
        if s.cb_block_size:
            cmd += ["--cb-block-size", str(s.cb_block_size)]
        return cmd + s.extra_args

    def env(self) -> dict[str, str]:
        return {"HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1"}

    def generation_config(self, **extra) -> str:
        """The protocol's decoding as the JSON GenerationConfig the server reads whole."""
        d = self.protocol.decoding.resolved()
        config = {k: d[k] for k in GENERATION_FIELDS
                  if d.get(k) is not None} | {"do_sample": bool(d.get("temperature"))}
        return json.dumps(config | extra, sort_keys=True)

    def sampling_fields(self, decoding: dict) -> dict:
        return {"temperature": decoding["temperature"], "top_p": decoding["top_p"], "seed": decoding["seed"],
                "generation_config": self.generation_config()}

    decoding_field_names: ClassVar[dict[str, str]] = {k: "generation_config" for k in ("top_k", "min_p",
                                                                                      "repetition_penalty")}

    def output_length_fields(self, n: int) -> dict:
        return {"max_tokens": n, "generation_config": self.generation_config(max_new_tokens=n, eos_token_id=NO_EOS)}

    def _ready_extra(self, client: httpx.Client) -> bool:
        # /health answers before the model is loaded: one generated token proves it is.
        try:
            r = client.post(self.base_url + "/v1/chat/completions", timeout=max(60.0, self.spec.startup_timeout_s),
                            json={"model": self.served_name, "max_tokens": 1, "temperature": 0.0,
                                  "messages": [{"role": "user", "content": "Hi"}]})
        except httpx.HTTPError:
            return False
        return r.status_code == 200

    def reset_prefix_cache(self, client: httpx.Client) -> str:
        if not self.spec.continuous_batching:
            return "nothing to reset: without continuous batching no KV is kept between requests"
        return ("not offered: transformers serve has no flush endpoint; under continuous batching its paged "
                "cache may share the blocks of a common prefix between requests in flight")

    def probe(self) -> dict:
        """What the engine's interpreter says of itself and of this checkpoint (asked once)."""
        if getattr(self, "_probe", None) is None:
            try:
                done = subprocess.run([self.python, "-c", ENGINE_PROBE, str(self._checkpoint()),
                                       self.spec.attn_implementation or ""], capture_output=True, text=True,
                                      timeout=180, env={**os.environ, **self.env()})
                self._probe = json.loads(done.stdout.strip().splitlines()[-1])
            except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
                self._probe = {}
        return self._probe

    def attention(self, probe: dict) -> str:
        """The attention the server runs: the library's pick for the checkpoint, which continuous
        batching keeps (sdpa, flash) or turns paged (eager), and swaps for flash attention where
        that is installed (its switch_to_cb_friendly_attn)."""
        picked = probe.get("attention")
        if picked is None:
            return f"unknown: {probe.get('attention_error', 'the engine did not answer the probe')}"
        if not self.spec.continuous_batching:
            return f"{picked} (the library's pick for this checkpoint)"
        if picked in ("sdpa", "eager") and probe.get("flash_attention") and not self.spec.attn_implementation:
            return f"flash_attention_2 (continuous batching swaps {picked} for the installed flash attention)"
        if picked == "eager":
            return "paged|eager (continuous batching pages the eager attention)"
        return f"{picked} (the library's pick for this checkpoint, kept under continuous batching)"

    def identity(self) -> dict:
        p = self.probe()
        device = self.spec.device if self.spec.device != "auto" else p.get("device", "unknown")
        versions = {k: p.get(k, "unknown") for k in ("transformers", "torch")}
        return {"engine": "Transformers (transformers serve)",
                "version": f"transformers {versions['transformers']}, torch {versions['torch']}", **versions,
                "device": device, "dtype": DTYPES.get(self.protocol.precision.weights),
                "attention_implementation": self.attention(p),
                "continuous_batching": self.spec.continuous_batching,
                "kv_layout": ("paged blocks (continuous batching)" if self.spec.continuous_batching
                              else "one contiguous dynamic cache per request"),
                "chat_template_sha256": chat_template_sha256(self.artifacts.hf_dir if self.artifacts else None)}

    def realized_capacity(self) -> dict:
        # The server logs neither its paged cache's size nor a cap: both are shown, never claimed.
        pool = ("none: each request's generate call grows its own cache" if not self.spec.continuous_batching
                else "not logged: transformers serve sizes its paged cache at the first request and does not say how")
        return {"source": "transformers serve log", "kv_pool": pool} | smallest_limit({
            "sequence_cap": capacity_limit(None, "none", "transformers serve has no cap on requests at once"),
            "context": capacity_limit(None, "not enforced", "transformers serve has no context limit",
                                      unit="tokens per sequence")})

    # -- set-up -----------------------------------------------------------------------------
    install_label = "Transformers install"

    @classmethod
    def install(cls, ctx: InstallContext) -> None:
        """transformers with its server's packages beside the pinned +cpu torch."""
        log(f"Transformers: installing transformers {TRANSFORMERS_VERSION} with its server into its own environment")
        python = fresh_venv(ctx, cls.install_dir())
        pip_log = ctx.pip_log("transformers")
        index = torch_cpu_index(python, TORCH_PIN, pip_log)
        pip_install(pip_log, [str(python), "-m", "pip", "install", "-q", *index, TORCH_PIN,
                              f"transformers[serving]=={TRANSFORMERS_VERSION}"])
        if not imports(python, "import torch, fastapi, uvicorn, transformers.cli.serving.server"):
            raise InstallFailed(f"Transformers install failed; see {pip_log}")
        mark_installed(cls.install_dir())
