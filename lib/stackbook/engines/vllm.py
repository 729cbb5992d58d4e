"""vLLM's GPU engine (package `vllm`): a Python server with the OpenAI API that states its
realized KV capacity in its own log. Its CPU build (engines/vllm_cpu.py) shares the adapter."""
from __future__ import annotations

import hashlib
import json
import re
import sys
from typing import Literal

import httpx
from pydantic import Field

from stackbook import sizing
from stackbook.engines.base import ANSI, EngineAdapter, parse_int
from stackbook.engines.spec import CapacityBasis, EngineSpec

VLLM_KV_TOKENS = r"(?P<pool>[A-Z]+(?: \+ host)?) KV cache size: (?P<tokens>[\d,]+) tokens"
VLLM_MAX_CONCURRENCY = r"Maximum concurrency for (?P<max_len>[\d,]+) tokens per request: (?P<conc>[\d.]+)x"
VLLM_AVAILABLE_KV = r"Available KV cache memory: (?P<gib>[\d.]+) GiB"


def parse_vllm_capacity(log_text: str) -> dict:
    """Realized KV capacity from vLLM's start-up log (the lines it prints after profiling)."""
    text = ANSI.sub("", log_text)
    out: dict = {"source": "vLLM log"}
    if m := re.search(VLLM_KV_TOKENS, text):
        out.update(kv_pool=m["pool"], kv_tokens=parse_int(m["tokens"]))
    if m := re.search(VLLM_MAX_CONCURRENCY, text):
        out.update(max_concurrency_context=parse_int(m["max_len"]), max_concurrency=float(m["conc"]))
    if m := re.search(VLLM_AVAILABLE_KV, text):
        out["available_kv_gib"] = float(m["gib"])
    return out


class VllmEngine(EngineSpec):
    kind: Literal["vllm"]
    gpu_memory_utilization: float = Field(0.92, gt=0, le=1)
    tensor_parallel_size: int = Field(1, gt=0)
    max_num_seqs: int | None = Field(None, gt=0)
    kv_cache_dtype: str = "auto"

    def configured_capacity(self, protocol) -> dict:
        return {"gpu_memory_utilization": self.gpu_memory_utilization, "max_model_len": protocol.context_length}

    def predicted_capacity(self, basis: CapacityBasis) -> dict:
        g, p = basis.geometry, basis.protocol
        available = basis.pool_bytes if basis.pool_bytes is not None else (
            basis.device_memory_bytes * self.gpu_memory_utilization
            - sizing.weight_bytes(g.num_parameters, p.precision.weights, basis.artifact_bytes)
            - basis.activations_bytes)
        acc = sizing.vllm_kv_accounting(g, available, p.context_length, p.precision.kv_cache, basis.state_precision)
        return {"kv_tokens": acc["kv_cache_size_tokens"], "max_concurrency": acc["max_concurrency"], **acc,
                "rule": "vLLM V1 block accounting (hybrid attention blocks inflated to the state page size)"}


class VllmAdapter(EngineAdapter):
    """The vLLM GPU engine, launched as `python -m vllm.entrypoints.openai.api_server`."""
    spec_model = VllmEngine
    installs = "the vllm package into the environment that runs stackbook, on a machine with a GPU"

    @property
    def python(self) -> str:
        return sys.executable

    def common_args(self) -> list[str]:
        if self.artifacts is None or self.artifacts.hf_dir is None:
            raise FileNotFoundError(f"{self.kind} needs a Hugging Face model directory: set model.hf_path")
        d = self.protocol.decoding.resolved()
        return ["--model", str(self.artifacts.hf_dir), "--served-model-name", self.served_name,
                "--host", self.spec.host, "--port", str(self.port),
                "--max-model-len", str(self.protocol.context_length),
                "--dtype", {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}.get(
                    self.protocol.precision.weights, "auto"),
                "--seed", str(d["seed"]), "--generation-config", "vllm",
                # usage.prompt_tokens_details.cached_tokens: prefix-cache hits per request
                "--enable-prompt-tokens-details"]

    def command(self) -> list[str]:
        s = self.spec
        cmd = [self.python, "-m", "vllm.entrypoints.openai.api_server", *self.common_args(),
               "--gpu-memory-utilization", str(s.gpu_memory_utilization),
               "--tensor-parallel-size", str(s.tensor_parallel_size), "--kv-cache-dtype", s.kv_cache_dtype]
        if s.max_num_seqs:
            cmd += ["--max-num-seqs", str(s.max_num_seqs)]
        return cmd + s.extra_args

    def env(self) -> dict[str, str]:
        env = {"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
               "VLLM_LOGGING_COLOR": "0", "VLLM_HOST_IP": self.spec.host}
        if self.spec.host in ("127.0.0.1", "localhost", "::1"):
            # exposes POST /reset_prefix_cache, the flush a cold-cache protocol needs; only on loopback
            env["VLLM_SERVER_DEV_MODE"] = "1"
        return env

    def output_length_fields(self, n: int) -> dict:
        return {"max_tokens": n, "min_tokens": n, "ignore_eos": True}

    def reset_prefix_cache(self, client: httpx.Client) -> str:
        try:
            code = client.post(self.base_url + "/reset_prefix_cache").status_code
        except httpx.HTTPError:
            code = 0
        return "reset (POST /reset_prefix_cache)" if code == 200 else \
            f"not available (HTTP {code}; vLLM offers it with VLLM_SERVER_DEV_MODE=1, set only on loopback)"

    def engine_version(self) -> str:
        try:
            return httpx.get(self.base_url + "/version", timeout=5).json().get("version", "unknown")
        except (httpx.HTTPError, ValueError):
            return "unknown"

    def identity(self) -> dict:
        template = None
        if self.artifacts and self.artifacts.hf_dir:
            jinja = self.artifacts.hf_dir / "chat_template.jinja"
            tc = self.artifacts.hf_dir / "tokenizer_config.json"
            if jinja.exists():
                template = jinja.read_text()
            elif tc.exists():
                template = json.loads(tc.read_text()).get("chat_template")
        return {"engine": "vLLM", "version": self.engine_version(),
                "chat_template_sha256": hashlib.sha256(template.encode()).hexdigest() if template else None}

    def realized_capacity(self) -> dict:
        return parse_vllm_capacity("".join(self.log_lines))
