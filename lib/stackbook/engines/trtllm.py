"""TensorRT-LLM's OpenAI server (`trtllm-serve`, PyTorch backend) in its own environment under the
cache; GPU only. Its settings beyond the command line (KV dtype, block reuse, iteration stats,
Prometheus) go in an LLM-API options file passed with --config. It states its realized KV pool in
the `[MemUsageChange] ... paged KV cache (N)` log line, and again in its JSON /metrics
(iteration stats); it has no prefix-cache flush: block reuse is on or off for the whole run."""
from __future__ import annotations

import math
import re
import tempfile
from pathlib import Path
from typing import ClassVar, Literal

import httpx
import yaml
from pydantic import Field

from stackbook import sizing
from stackbook.engines.base import ANSI, PythonEngineAdapter, chat_template_sha256, dtype_flag
from stackbook.engines.facts import ON_THE_GPU, DecisionFacts
from stackbook.engines.install import InstallContext, gpu_env, log, require_gpu, system_has_mpi
from stackbook.engines.spec import CapacityBasis, PythonEngineSpec

TRTLLM_VERSION = "1.2.1"
TOKENS_PER_BLOCK = 32  # KvCacheConfig.tokens_per_block default
# Log lines of the C++ KV cache manager (cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp).
TRT_ALLOCATED = r"\[MemUsageChange\] Allocated (?P<gib>[\d.]+) GiB for max tokens in paged KV cache \((?P<tokens>\d+)\)"
TRT_BLOCKS_PER_SEQ = (r"Max KV cache blocks per sequence: (?P<blocks_per_seq>\d+) \[window size=(?P<window>\d+)\], "
                      r"tokens per block=(?P<tpb>\d+), primary blocks=(?P<primary>\d+), secondary "
                      r"blocks=(?P<secondary>\d+)"
                      r"(?:, max sequence length=(?P<max_seq_len>\d+))?")
TRT_LEGACY_MAX_TOKENS = r"Max tokens in paged KV cache: (?P<tokens>\d+)\. Allocating (?P<bytes>\d+) bytes"
TRT_LEGACY_USING_TOKENS = r"Using (?P<tokens>\d+) tokens in paged KV cache"
TRT_VERSION = r"\[TensorRT-LLM\] TensorRT(?:-| )LLM version: (?P<version>\S+)"
# TensorRT-LLM's names for the protocol's precisions (kv_cache_config.dtype, .mamba_ssm_cache_dtype).
TRT_KV_DTYPES = {"fp8": "fp8"}
TRT_STATE_DTYPES = {"fp32": "float32", "bf16": "bfloat16"}


def parse_trtllm_capacity(log_text: str) -> dict:
    """Realized KV capacity from TensorRT-LLM's log: the last `[MemUsageChange]` line (each rank and
    each re-allocation prints one), with the block geometry beside it; the older runtimes' lines
    where that one is absent. Only `source` comes back when no line is found."""
    text = ANSI.sub("", log_text)
    out: dict = {"source": "TensorRT-LLM log"}
    if allocated := list(re.finditer(TRT_ALLOCATED, text)):
        m = allocated[-1]
        out.update(kv_tokens=int(m["tokens"]), kv_cache_gib=float(m["gib"]))
    elif m := re.search(TRT_LEGACY_MAX_TOKENS, text) or re.search(TRT_LEGACY_USING_TOKENS, text):
        out["kv_tokens"] = int(m["tokens"])
    if blocks := list(re.finditer(TRT_BLOCKS_PER_SEQ, text)):
        m = blocks[-1]
        out.update(tokens_per_block=int(m["tpb"]), primary_blocks=int(m["primary"]),
                   blocks_per_sequence=int(m["blocks_per_seq"]))
        if m["max_seq_len"]:
            out["max_sequence_length"] = int(m["max_seq_len"])
    if m := re.search(TRT_VERSION, text):
        out["version_in_log"] = m["version"]
    return out


def parse_trtllm_iteration_stats(stats: list) -> dict:
    """Realized KV capacity from the JSON /metrics (iteration stats: maxNumBlocks x tokensPerBlock
    of the latest iteration that reports them). Each read drains the stats, so an idle server may
    return [] and then only `source` comes back."""
    out: dict = {"source": "TensorRT-LLM /metrics (iteration stats)"}
    for entry in reversed(stats if isinstance(stats, list) else []):
        kv = entry.get("kvCacheStats") if isinstance(entry, dict) else None
        if kv and kv.get("maxNumBlocks") and kv.get("tokensPerBlock"):
            out.update(kv_tokens=kv["maxNumBlocks"] * kv["tokensPerBlock"], max_blocks=kv["maxNumBlocks"],
                       tokens_per_block=kv["tokensPerBlock"])
            if entry.get("maxNumActiveRequests") is not None:
                out["max_active_requests"] = entry["maxNumActiveRequests"]
            break
    return out


class TrtllmEngine(PythonEngineSpec):
    kind: Literal["trtllm"]
    managed_flags: ClassVar[dict[str, str]] = {
        "--host": "engine.host (with engine.expose)", "--port": "engine.port", "--backend": "the kind (trtllm)",
        "--tp_size": "engine.tp_size", "--max_seq_len": "protocol.context_length",
        "--kv_cache_free_gpu_memory_fraction": "engine.kv_cache_free_gpu_memory_fraction",
        "--max_batch_size": "engine.max_batch_size", "--max_num_tokens": "engine.max_num_tokens",
        "--config": "engine.enable_block_reuse, engine.enable_chunked_prefill and protocol.precision"}
    tp_size: int = Field(1, gt=0)
    kv_cache_free_gpu_memory_fraction: float = Field(0.9, gt=0, le=1, description="share of the GPU memory "
                                                     "free after the weights that becomes KV cache")
    max_batch_size: int | None = Field(None, gt=0, description="None: TensorRT-LLM's default (2048)")
    max_num_tokens: int | None = Field(None, gt=0, description="per-iteration token budget; None: its default")
    enable_block_reuse: bool = Field(True, description="prefix caching; TensorRT-LLM cannot flush it")
    enable_chunked_prefill: bool = False

    def sequences_at_once(self) -> int | None:
        return self.max_batch_size

    def configured_capacity(self, protocol) -> dict:
        return {"kv_cache_free_gpu_memory_fraction": self.kv_cache_free_gpu_memory_fraction,
                "max_seq_len": protocol.context_length,
                "max_batch_size": self.max_batch_size or "engine default (2048)"}

    def predicted_capacity(self, basis: CapacityBasis) -> dict:
        g, p = basis.geometry, basis.protocol
        available = basis.pool_bytes if basis.pool_bytes is not None else self.kv_cache_free_gpu_memory_fraction * (
            basis.device_memory_bytes
            - sizing.weight_bytes(g.num_parameters, p.precision.weights, basis.artifact_bytes)
            - basis.activations_bytes)
        block_bytes = sizing.model_kv_bytes_per_token(g, p.precision.kv_cache, self.tp_size) * TOKENS_PER_BLOCK
        blocks = int(available // block_bytes)
        per_request = math.ceil(p.context_length / TOKENS_PER_BLOCK)
        # A hybrid model's recurrent state is charged once per running request beside its blocks;
        # where TensorRT-LLM places that state is not modelled: its log says what it realized.
        state = sizing.model_state_bytes_per_sequence(g, basis.state_precision)
        requests = int(available // (per_request * block_bytes + state))
        return {"kv_tokens": blocks * TOKENS_PER_BLOCK, "primary_blocks": blocks, "available_kv_bytes": int(available),
                "blocks_per_request": per_request, "state_bytes_per_request": state,
                "max_concurrency": min(requests, self.max_batch_size or 2048),
                "rule": f"free memory after weights x kv_cache_free_gpu_memory_fraction, in {TOKENS_PER_BLOCK}-token "
                        "KV blocks; full-context requests = that memory / (their blocks + their recurrent state)"}


class TrtllmAdapter(PythonEngineAdapter):
    spec_model = TrtllmEngine
    installs = f"TensorRT-LLM {TRTLLM_VERSION} into its own environment, on a machine with an NVIDIA GPU"
    bootstrap_step = "trtllm"
    setup_target = "setup-gpu"
    env_name = f"tensorrt-llm-{TRTLLM_VERSION}"
    pinned_version = TRTLLM_VERSION
    metrics_path = "/prometheus/metrics"  # mounted with return_perf_metrics; /metrics is JSON stats
    length_control = "min_tokens and ignore_eos"
    needs_gpu = True
    native_precisions = ON_THE_GPU
    distributions = ("tensorrt_llm", "torch")
    decision = DecisionFacts(
        stack="TensorRT-LLM",
        parallel="tensor, pipeline, expert and context parallel (`--tp_size`, `--pp_size`, `--ep_size`, `--cp_size`)",
        long_context="`--max_seq_len`; chunked prefill off by default, and `--max_num_tokens` caps the prompt "
                     "length unless it is on",
        reasoning="`--reasoning_parser`",
        images=None,
        structured_output="`guided_decoding_backend` (xgrammar, llguidance); unset, response_format is not enforced",
        prefix_cache=None)

    @classmethod
    def shortlist_reason(cls, answers) -> str | None:
        if answers.platform != "nvidia" or not answers.throughput_dominant_cost or answers.ops_engineers < 1:
            return None
        return ("NVIDIA-only fleet where throughput is the dominant cost and there is engineering "
                "time for build and compatibility validation")

    def __init__(self, spec, artifacts, protocol, served_name, log_path=None):
        super().__init__(spec, artifacts, protocol, served_name, log_path)
        # trtllm-serve names a local model by its directory's basename.
        if artifacts is not None and artifacts.hf_dir is not None:
            self.served_name = artifacts.hf_dir.name

    @classmethod
    def installed_executable(cls) -> Path:
        return cls.install_dir() / "bin" / "python"

    @property
    def serve_executable(self) -> str:
        """The `trtllm-serve` console script beside the interpreter."""
        return str(Path(self.python).parent / "trtllm-serve")

    @property
    def config_path(self) -> Path:
        """Where the LLM-API options file is written: beside the engine log, else in the temp dir."""
        folder = self.log_path.parent if self.log_path else Path(tempfile.gettempdir())
        return folder / f"trtllm-options-{self.port}.yaml"

    def llm_api_options(self) -> dict:
        """What trtllm-serve takes only from --config: KV precision and block reuse as the protocol
        and the spec fix them, iteration stats (the JSON /metrics) and Prometheus."""
        prec, s = self.protocol.precision, self.spec
        kv_cache = {"free_gpu_memory_fraction": s.kv_cache_free_gpu_memory_fraction,
                    "dtype": dtype_flag(self.kind, "kv_cache", prec.kv_cache, TRT_KV_DTYPES, prec.weights),
                    "enable_block_reuse": s.enable_block_reuse}
        if prec.state != "none":
            kv_cache["mamba_ssm_cache_dtype"] = dtype_flag(self.kind, "state", prec.state, TRT_STATE_DTYPES,
                                                           prec.weights)
        return {"kv_cache_config": kv_cache, "enable_chunked_prefill": s.enable_chunked_prefill,
                "enable_iter_perf_stats": True, "return_perf_metrics": True}

    def command(self) -> list[str]:
        if self.artifacts is None or self.artifacts.hf_dir is None:
            raise FileNotFoundError("trtllm needs a Hugging Face model directory: set model.hf_path")
        s = self.spec
        self.llm_api_options()  # refuses a precision the engine cannot take, before anything starts
        cmd = [self.serve_executable, str(self.artifacts.hf_dir), "--host", s.host, "--port", str(self.port),
               "--backend", "pytorch", "--tp_size", str(s.tp_size), "--max_seq_len", str(self.protocol.context_length),
               "--kv_cache_free_gpu_memory_fraction", str(s.kv_cache_free_gpu_memory_fraction)]
        if s.max_batch_size:
            cmd += ["--max_batch_size", str(s.max_batch_size)]
        if s.max_num_tokens:
            cmd += ["--max_num_tokens", str(s.max_num_tokens)]
        return cmd + ["--config", str(self.config_path)] + s.extra_args

    def env(self) -> dict[str, str]:
        return {"HF_HUB_OFFLINE": "1", "TRTLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}

    def launch_record(self) -> dict:
        return super().launch_record() | {"config": self.llm_api_options()}

    def start(self) -> "TrtllmAdapter":
        self.config_path.parent.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(yaml.safe_dump(self.llm_api_options(), sort_keys=False))
        return super().start()

    def output_length_fields(self, n: int) -> dict:
        return {"max_tokens": n, "min_tokens": n, "ignore_eos": True}

    def reset_prefix_cache(self, client: httpx.Client) -> str:
        state = "on" if self.spec.enable_block_reuse else "off"
        return (f"not offered: TensorRT-LLM has no flush endpoint; block reuse is {state} for the whole run "
                "(engine.enable_block_reuse)")

    def engine_version(self) -> str:
        try:
            return httpx.get(self.base_url + "/version", timeout=5).json().get("version", "unknown")
        except (httpx.HTTPError, ValueError):
            return self.package_versions("tensorrt_llm")["tensorrt_llm"]

    def identity(self) -> dict:
        return {"engine": "TensorRT-LLM (trtllm-serve, PyTorch backend)", "version": self.engine_version(),
                "chat_template_sha256": chat_template_sha256(self.artifacts.hf_dir if self.artifacts else None),
                "llm_api_options": self.llm_api_options()}

    def realized_capacity(self) -> dict:
        out = parse_trtllm_capacity("".join(self.log_lines))
        if "kv_tokens" not in out:
            try:
                stats = parse_trtllm_iteration_stats(httpx.get(self.base_url + "/metrics", timeout=5).json())
            except (httpx.HTTPError, ValueError):
                stats = {}
            if "kv_tokens" in stats:
                return stats
        return out

    # -- set-up -----------------------------------------------------------------------------
    install_label = "TensorRT-LLM install"

    @classmethod
    def install(cls, ctx: InstallContext) -> None:
        require_gpu()
        # TensorRT-LLM's wheel needs the MPI runtime from the system (Debian/Ubuntu: apt-get install libopenmpi-dev).
        if not system_has_mpi():
            log("TensorRT-LLM: no libmpi.so found; install libopenmpi-dev first if the import check fails")
        gpu_env(ctx, cls.env_name, "import tensorrt_llm", f"tensorrt-llm=={TRTLLM_VERSION}")
