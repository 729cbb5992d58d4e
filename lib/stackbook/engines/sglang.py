"""SGLang (GPU only): a Python server with the OpenAI API. Its /health_generate generates one
token when idle, a real readiness probe; its scheduler logs the capacity it realized."""
from __future__ import annotations

import re
import sys
from typing import Literal

import httpx
from pydantic import Field

from stackbook import sizing
from stackbook.engines.base import ANSI, EngineAdapter
from stackbook.engines.spec import CapacityBasis, EngineSpec

SGLANG_CAPACITY = (r"max_total_num_tokens=(?P<max_total_num_tokens>\d+)(?:, chunked_prefill_size=(?P<chunked>-?\d+|None))?, "
                   r"max_prefill_tokens=(?P<max_prefill_tokens>\d+), max_running_requests=(?P<max_running_requests>\d+), "
                   r"context_len=(?P<context_len>\d+)")


def parse_sglang_capacity(log_text: str) -> dict:
    text = ANSI.sub("", log_text)
    out: dict = {"source": "SGLang log"}
    if m := re.search(SGLANG_CAPACITY, text):
        out.update(kv_tokens=int(m["max_total_num_tokens"]), max_running_requests=int(m["max_running_requests"]),
                   context_len=int(m["context_len"]))
    return out


class SglangEngine(EngineSpec):
    kind: Literal["sglang"]
    mem_fraction_static: float | None = Field(None, gt=0, le=1)
    tp_size: int = Field(1, gt=0)
    disable_radix_cache: bool = False
    mamba_full_memory_ratio: float = Field(0.9, gt=0)
    mamba_scheduler_strategy: Literal["extra_buffer", "no_buffer"] = "extra_buffer"

    def configured_capacity(self, protocol) -> dict:
        return {"mem_fraction_static": self.mem_fraction_static or "engine default",
                "context_length": protocol.context_length}

    def predicted_capacity(self, basis: CapacityBasis) -> dict:
        p = basis.protocol
        if basis.pool_bytes is None:
            raise ValueError("sglang's capacity rule splits a known cache pool: set hardware.pool_gib "
                             "(the pool SGLang's log reports, or the research seed for this accelerator)")
        radix = "disabled" if self.disable_radix_cache else self.mamba_scheduler_strategy
        acc = sizing.sglang_kv_accounting(basis.geometry, basis.pool_bytes, p.context_length, p.precision.kv_cache,
                                          basis.state_precision, self.mamba_full_memory_ratio, radix)
        return {"kv_tokens": acc["max_total_num_tokens"], "max_concurrency": acc["max_concurrency"], **acc,
                "rule": "SGLang: state slots = pool x r/(1+r) / state; KV gets the rest; requests <= slots // S"}


class SglangAdapter(EngineAdapter):
    spec_model = SglangEngine
    installs = "the sglang package into the environment that runs stackbook, on a machine with a GPU"
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
