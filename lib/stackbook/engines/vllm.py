"""vLLM's GPU engine (package `vllm`) in its own environment under the cache: a Python server
with the OpenAI API that states its realized KV capacity in its own log. Its CPU build
(engines/vllm_cpu.py) shares the adapter."""
from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

import httpx
from pydantic import Field, model_validator

from stackbook import sizing
from stackbook.engines.base import ANSI, PythonEngineAdapter, chat_template_sha256, dtype_flag
from stackbook.engines.capacity import capacity_limit, parse_int, smallest_limit
from stackbook.engines.facts import ON_THE_GPU, DecisionFacts, MetricSeries, ProcessRole
from stackbook.engines.install import InstallContext, gpu_env, require_gpu
from stackbook.engines.spec import LOOPBACK_HOSTS, CapacityBasis, PythonEngineSpec

VLLM_VERSION = "0.33.0"
SERVER_MODULE = "vllm.entrypoints.openai.api_server"  # what both vLLM kinds launch with `python -m`
VLLM_KV_TOKENS = r"(?P<pool>[A-Z]+(?: \+ host)?) KV cache size: (?P<tokens>[\d,]+) tokens"
VLLM_MAX_CONCURRENCY = r"Maximum concurrency for (?P<max_len>[\d,]+) tokens per request: (?P<conc>[\d.]+)x"
VLLM_AVAILABLE_KV = r"Available KV cache memory: (?P<gib>[\d.]+) GiB"
VLLM_LEGACY_BLOCKS = r"# GPU blocks: (?P<gpu_blocks>\d+)(?:, # CPU blocks: (?P<cpu_blocks>\d+))?"
VLLM_SEQUENCE_CAP = r"non-default args: \{.*'max_num_seqs': (?P<seqs>\d+)"  # logged only when set
# The dtype names vLLM's --dtype, --kv-cache-dtype and --mamba-ssm-cache-dtype take.
VLLM_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
VLLM_KV_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp8": "fp8"}
VLLM_STATE_DTYPES = {"fp32": "float32", "bf16": "bfloat16"}

# vLLM runs an API-server process, an EngineCore process that schedules (`VLLM::EngineCore`) and,
# in its CPU build, a worker that runs the model (`VLLM::Worker`); with no separate worker,
# EngineCore computes itself. The kernel keeps 15 characters of a name: VLLM::EngineCor.
VLLM_PROCESS_ROLES = (
    ProcessRole(pattern=r"EngineCor", role="engine_core", centre="compute", schedules_beside="worker",
                why_m="1: one EngineCore process (Python: one core at a time) schedules every engine step",
                measured_as="EngineCore process CPU seconds / requests completed (it schedules every step; the "
                            "model runs in the worker)"),
    ProcessRole(pattern=r"vllm\.entrypoints|vllm serve|api_server|APIServer", role="api_server", centre="front end",
                why_m="1: one API-server process (Python: one core at a time) parses, tokenizes and streams every "
                      "request",
                measured_as="API-server process CPU seconds / requests completed"),
    ProcessRole(pattern=r"resource_tracker", role="resource_tracker"),
    ProcessRole(pattern=r"::Worker", role="worker", centre="compute"),
)
# vLLM's per-request histograms (seconds), by the phase of a request each one times.
VLLM_PHASES = {"queue": "request_queue_time_seconds", "prefill": "request_prefill_time_seconds",
               "decode": "request_decode_time_seconds", "inference": "request_inference_time_seconds",
               "e2e": "e2e_request_latency_seconds"}
VLLM_METRICS = MetricSeries(
    kept=("prefix_cache_", "kv_cache_usage", "num_requests_running", "num_requests_waiting", "preemptions",
          "prompt_tokens_total", "generation_tokens_total", "time_to_first_token_seconds",
          "inter_token_latency_seconds", *VLLM_PHASES.values(), "iteration_tokens_total", "spec_decode_"),
    bucketed=(*VLLM_PHASES.values(), "iteration_tokens_total"),
    gauges=("num_requests_running", "num_requests_waiting", "kv_cache_usage"),
    batch_gauges=("num_requests_running",),
    queue_gauges=("num_requests_waiting",),
    phase_histograms=VLLM_PHASES, phase_source="engine histograms (vllm:request_*_time_seconds)",
    latency_histograms={"ttft": "time_to_first_token_seconds", "itl": "inter_token_latency_seconds"},
    step_tokens_histogram="iteration_tokens_total",
    prompt_token_counters=("prompt_tokens_total",), generated_token_counters=("generation_tokens_total",),
    spec_decode_counters={"drafts": "spec_decode_num_drafts_total",
                          "accepted_tokens": "spec_decode_num_accepted_tokens_total",
                          "draft_tokens": "spec_decode_num_draft_tokens_total"},
    cache_hit_counters=("vllm:prefix_cache_hits_total",), cache_query_counters=("vllm:prefix_cache_queries_total",))
VLLM_DECISION = DecisionFacts(
    stack="vLLM",
    parallel="tensor and pipeline parallel (`--tensor-parallel-size`, `-pp`, `-dp`)",
    long_context="`--max-model-len` (-1 fits it to memory), chunked prefill on by default",
    reasoning="`--reasoning-parser` splits the thinking from the answer",
    images="multimodal inputs, with its own multimodal and encoder caches",
    structured_output="structured outputs (xgrammar, guidance, outlines, lm-format-enforcer)",
    prefix_cache="prefix caching, on by default")


def parse_vllm_capacity(log_text: str) -> dict:
    """Realized KV capacity from vLLM's start-up log (the lines it prints after profiling): the
    one-line form of 0.28 on, the two-line form of 0.8 to 0.27, the block count of V0 and early V1.
    Only `source` comes back when no line is found. kv_max_concurrency is what the KV blocks hold
    at the served context; max_num_seqs the sequence cap the engine logged (only when it was set)."""
    text = ANSI.sub("", log_text)
    out: dict = {"source": "vLLM log"}
    if m := re.search(VLLM_KV_TOKENS, text):
        out.update(kv_pool=m["pool"], kv_tokens=parse_int(m["tokens"]))
    if m := re.search(VLLM_MAX_CONCURRENCY, text):
        out.update(max_concurrency_context=parse_int(m["max_len"]), kv_max_concurrency=float(m["conc"]))
    if m := re.search(VLLM_SEQUENCE_CAP, text):
        out["max_num_seqs"] = int(m["seqs"])
    if m := re.search(VLLM_AVAILABLE_KV, text):
        out["available_kv_gib"] = float(m["gib"])
    if m := re.search(VLLM_LEGACY_BLOCKS, text):
        out["gpu_blocks"] = int(m["gpu_blocks"])
        if m["cpu_blocks"]:
            out["cpu_blocks"] = int(m["cpu_blocks"])
    return out


class VllmEngine(PythonEngineSpec):
    kind: Literal["vllm"]
    speculative_flags: ClassVar[tuple[str, ...]] = ("--speculative-config", "-sc", "--speculative-model",
                                                    "--num-speculative-tokens")
    managed_flags: ClassVar[dict[str, str]] = {
        "--model": "model (model.hf_path)", "--served-model-name": "model.name",
        "--host": "engine.host (with engine.expose)", "--port": "engine.port",
        "--max-model-len": "protocol.context_length", "--dtype": "protocol.precision.weights",
        "--seed": "protocol.decoding.seed", "--kv-cache-dtype": "protocol.precision.kv_cache",
        "--mamba-ssm-cache-dtype": "protocol.precision.state", "--max-num-seqs": "engine.max_num_seqs",
        "--gpu-memory-utilization": "engine.gpu_memory_utilization",
        "--tensor-parallel-size": "engine.tensor_parallel_size", "-tp": "engine.tensor_parallel_size"}
    gpu_memory_utilization: float = Field(0.92, gt=0, le=1)
    tensor_parallel_size: int = Field(1, gt=0)
    max_num_seqs: int | None = Field(None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _precision_is_the_protocols(cls, data: Any) -> Any:
        if isinstance(data, dict) and "kv_cache_dtype" in data:
            # "auto" is what earlier run directories recorded for the field; they still load.
            if data["kv_cache_dtype"] != "auto":
                raise ValueError("kv_cache_dtype: the KV precision is part of the protocol, the same for every "
                                 "arm; remove it here and set protocol.precision.kv_cache")
            data = {k: v for k, v in data.items() if k != "kv_cache_dtype"}
        return data

    def sequences_at_once(self) -> int | None:
        return self.max_num_seqs

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


VLLM_ENGINE_LINE = r"Initializing a V1 LLM engine \((v[\w.+-]+)\) with config: .*?device_config=(\w+)"
VLLM_ATTENTION_LINE = re.compile(r"Using (\w+) (?:attention )?backend")


def logged_attention_backends(lines: list[str]) -> list[str]:
    """Every attention backend vLLM says it is using ("Using FLASH_ATTN backend."), in order, once each."""
    return list(dict.fromkeys(m.group(1) for line in lines if (m := VLLM_ATTENTION_LINE.search(line))))


class VllmAdapter(PythonEngineAdapter):
    """The vLLM GPU engine, launched as `python -m vllm.entrypoints.openai.api_server`."""
    spec_model = VllmEngine
    installs = f"vLLM {VLLM_VERSION} (the GPU build) into its own environment, on a machine with an NVIDIA GPU"
    bootstrap_step = "vllm-gpu"
    setup_target = "setup-gpu"
    env_name = f"vllm-{VLLM_VERSION}"
    pinned_version = VLLM_VERSION
    length_control = "min_tokens and ignore_eos"
    needs_gpu = True
    native_precisions = ON_THE_GPU
    distributions = ("vllm", "torch")
    process_roles = VLLM_PROCESS_ROLES
    metric_series = VLLM_METRICS
    decision = VLLM_DECISION

    @classmethod
    def shortlist_reason(cls, answers) -> str | None:
        if answers.platform not in ("nvidia", "amd", "mixed"):
            return None
        return ("the default for serving an API on GPUs: broad model support, continuous batching, paged KV"
                + (f", for {answers.concurrent_users} concurrent users" if answers.concurrent_users > 1 else ""))

    def common_args(self) -> list[str]:
        if self.artifacts is None or self.artifacts.hf_dir is None:
            raise FileNotFoundError(f"{self.kind} needs a Hugging Face model directory: set model.hf_path")
        d = self.protocol.decoding.resolved()
        return ["--model", str(self.artifacts.hf_dir), "--served-model-name", self.served_name,
                "--host", self.spec.host, "--port", str(self.port),
                "--max-model-len", str(self.protocol.context_length),
                "--dtype", VLLM_DTYPES.get(self.protocol.precision.weights, "auto"),
                "--seed", str(d["seed"]), "--generation-config", "vllm",
                # usage.prompt_tokens_details.cached_tokens: prefix-cache hits per request
                "--enable-prompt-tokens-details"]

    def precision_args(self) -> list[str]:
        """The KV and recurrent-state precision of the protocol, the ones the sizing assumed."""
        prec = self.protocol.precision
        args = ["--kv-cache-dtype", dtype_flag(self.kind, "kv_cache", prec.kv_cache, VLLM_KV_DTYPES, prec.weights)]
        if prec.state != "none":
            args += ["--mamba-ssm-cache-dtype",
                     dtype_flag(self.kind, "state", prec.state, VLLM_STATE_DTYPES, prec.weights)]
        return args

    def command(self) -> list[str]:
        s = self.spec
        args = self.common_args() + self.precision_args()  # a missing model or precision is named first
        cmd = [self.python, "-m", SERVER_MODULE, *args,
               "--gpu-memory-utilization", str(s.gpu_memory_utilization),
               "--tensor-parallel-size", str(s.tensor_parallel_size)]
        if s.max_num_seqs:
            cmd += ["--max-num-seqs", str(s.max_num_seqs)]
        return cmd + s.extra_args

    def env(self) -> dict[str, str]:
        env = {"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
               "VLLM_LOGGING_COLOR": "0", "VLLM_HOST_IP": self.spec.host}
        if self.spec.host in LOOPBACK_HOSTS:
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

    def build_line(self) -> str | None:
        m = self.find_in_log(VLLM_ENGINE_LINE)
        return f"vLLM {m.group(1)} V1 engine, device {m.group(2)}" if m else None

    def kernel_choice(self) -> dict:
        logged = logged_attention_backends(self.log_lines)
        return {"attention_backend": logged} if logged else {}

    def identity(self) -> dict:
        return {"engine": "vLLM", "version": self.engine_version(),
                "chat_template_sha256": chat_template_sha256(self.artifacts.hf_dir if self.artifacts else None)}

    def realized_capacity(self) -> dict:
        """The smallest of vLLM's own limits, each as its log states it, the configured value beside."""
        out = parse_vllm_capacity("".join(self.log_lines))
        cap = self.spec.max_num_seqs
        return out | smallest_limit({
            "sequence_cap": capacity_limit(out.get("max_num_seqs"), cap or "engine default",
                                           "vLLM log: the non-default args' max_num_seqs"),
            "kv_blocks": capacity_limit(out.get("kv_max_concurrency"), self.spec.configured_capacity(self.protocol),
                                        "vLLM log: KV cache size / tokens per request"),
            "context": capacity_limit(out.get("max_concurrency_context"), self.protocol.context_length,
                                      "vLLM log: Maximum concurrency for N tokens per request",
                                      unit="tokens per sequence")})

    # -- set-up -----------------------------------------------------------------------------
    install_label = "vLLM (GPU build) install"

    @classmethod
    def install(cls, ctx: InstallContext) -> None:
        require_gpu()
        gpu_env(ctx, cls.env_name, "import vllm", f"vllm=={VLLM_VERSION}")
