"""SGLang (GPU only) in its own environment under the cache: a Python server with the OpenAI API.
Its /health_generate generates one token when idle, a real readiness probe; its scheduler logs
the capacity it realized, and for hybrid models the split between KV and recurrent state that
--mamba-full-memory-ratio and the scheduler strategy decide."""
from __future__ import annotations

import re
from typing import ClassVar, Literal

import httpx
from pydantic import Field

from stackbook import sizing
from stackbook.engines.base import ANSI, PythonEngineAdapter, chat_template_sha256, dtype_flag
from stackbook.engines.facts import ON_THE_GPU, DecisionFacts, MetricSeries
from stackbook.engines.install import InstallContext, gpu_env, require_gpu
from stackbook.engines.spec import CapacityBasis, PythonEngineSpec

SGLANG_VERSION = "0.5.23"
SGLANG_CAPACITY = (r"max_total_num_tokens=(?P<max_total_num_tokens>\d+)(?:, "
                   r"chunked_prefill_size=(?P<chunked>-?\d+|None))?, "
                   r"max_prefill_tokens=(?P<max_prefill_tokens>\d+), "
                   r"max_running_requests=(?P<max_running_requests>\d+), "
                   r"context_len=(?P<context_len>\d+)(?:, available_(?:gpu|cpu)_mem=(?P<avail_gb>[\d.]+) GB)?")
# One line per pool; "Post-capture KV sizing: KV cache allocated." (the resizer) is a different line.
SGLANG_KV_ALLOCATED = (r"(?:(?P<label>[\w-]+) )?KV Cache is allocated\. (?:dtype: (?P<dtype>\S+), )?#tokens: "
                       r"(?P<tokens>\d+), "
                       r"(?:K size: (?P<k_gb>[\d.]+) GB, V size: (?P<v_gb>[\d.]+) GB|KV size: (?P<kv_gb>[\d.]+) GB)")
SGLANG_MAMBA_ALLOCATED = r"Mamba Cache is allocated\. max_mamba_cache_size: (?P<slots>\d+)"
SGLANG_RANK = r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (?:DP\d+ )?(?:PP\d+ )?TP(?P<tp>\d+)"
# SGLang's names for the protocol's precisions (--kv-cache-dtype, --mamba-ssm-dtype).
SGLANG_KV_DTYPES = {"bf16": "bf16", "fp8": "fp8_e4m3"}
SGLANG_STATE_DTYPES = {"fp32": "float32", "bf16": "bfloat16"}


def parse_sglang_capacity(log_text: str) -> dict:
    """Realized capacity from SGLang's start-up log, rank 0's lines where ranks are tagged. Only
    `source` comes back when no line is found."""
    lines = ANSI.sub("", log_text).splitlines()
    ranked = [ln for ln in lines if (m := re.match(SGLANG_RANK, ln)) is None or m["tp"] == "0"]
    text = "\n".join(ranked)
    out: dict = {"source": "SGLang log"}
    if m := re.search(SGLANG_CAPACITY, text):
        out.update(kv_tokens=int(m["max_total_num_tokens"]), max_running_requests=int(m["max_running_requests"]),
                   context_len=int(m["context_len"]))
        if m["avail_gb"]:
            out["available_gpu_mem_gb"] = float(m["avail_gb"])
    pools = [m for m in re.finditer(SGLANG_KV_ALLOCATED, text)]
    if pools:
        out["kv_pools"] = [{"label": m["label"] or "full", "dtype": m["dtype"], "tokens": int(m["tokens"]),
                            "gb": round(float(m["kv_gb"]) if m["kv_gb"] else float(m["k_gb"]) + float(m["v_gb"]), 2)}
                           for m in pools]
    if m := re.search(SGLANG_MAMBA_ALLOCATED, text):
        out["state_slots"] = int(m["slots"])
    return out


class SglangEngine(PythonEngineSpec):
    kind: Literal["sglang"]
    speculative_flags: ClassVar[tuple[str, ...]] = ("--speculative-algorithm", "--speculative-draft-model-path",
                                                    "--speculative-num-steps")
    managed_flags: ClassVar[dict[str, str]] = {
        "--model-path": "model (model.hf_path)", "--served-model-name": "model.name",
        "--host": "engine.host (with engine.expose)", "--port": "engine.port",
        "--tp-size": "engine.tp_size", "--tp": "engine.tp_size", "--context-length": "protocol.context_length",
        "--random-seed": "protocol.decoding.seed", "--kv-cache-dtype": "protocol.precision.kv_cache",
        "--mamba-ssm-dtype": "protocol.precision.state", "--mamba-full-memory-ratio": "engine.mamba_full_memory_ratio",
        "--mem-fraction-static": "engine.mem_fraction_static", "--disable-radix-cache": "engine.disable_radix_cache"}
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


class SglangAdapter(PythonEngineAdapter):
    spec_model = SglangEngine
    installs = f"SGLang {SGLANG_VERSION} into its own environment, on a machine with an NVIDIA GPU"
    bootstrap_step = "sglang"
    setup_target = "setup-gpu"
    env_name = f"sglang-{SGLANG_VERSION}"
    pinned_version = SGLANG_VERSION
    health_path = "/health_generate"
    length_control = "min_tokens and ignore_eos"
    needs_gpu = True
    native_precisions = ON_THE_GPU
    distributions = ("sglang", "torch")
    metric_series = MetricSeries(cache_hit_counters=("sglang:cache_hit_tokens_total",),
                                 cache_query_counters=("sglang:cache_query_tokens_total",))
    decision = DecisionFacts(
        stack="SGLang",
        parallel="tensor, data, pipeline and expert parallel (`--tp-size`, `--dp-size`, `--pp-size`, `--ep-size`)",
        long_context="`--context-length` and `--chunked-prefill-size`; on hybrid models it splits memory between "
                     "state and KV, so realized KV tokens can fall far below the configured context",
        reasoning="`--reasoning-parser` (auto in v0.5.23)",
        images="image inputs (its bench_serving ships image and MMMU datasets)",
        structured_output="`--grammar-backend` (xgrammar, outlines, llguidance)",
        prefix_cache="radix-tree prefix reuse")

    @classmethod
    def shortlist_reason(cls, answers) -> str | None:
        many = f"{answers.concurrent_users} concurrent users"
        prefix_matters = answers.shared_prefix and answers.concurrent_users > 1
        if answers.platform not in ("nvidia", "amd") or not (prefix_matters or answers.json_output):
            return None
        jobs = [w for w, on in ((f"long prefixes shared across {many} (radix-tree reuse)", prefix_matters),
                                ("output that must validate against a schema (fast constrained decoding)",
                                 answers.json_output)) if on]
        return f"{' and '.join(jobs)}: the two problems it was built around"

    def command(self) -> list[str]:
        if self.artifacts is None or self.artifacts.hf_dir is None:
            raise FileNotFoundError("sglang needs a Hugging Face model directory: set model.hf_path")
        s, prec = self.spec, self.protocol.precision
        cmd = [self.python, "-m", "sglang.launch_server", "--model-path", str(self.artifacts.hf_dir),
               "--served-model-name", self.served_name, "--host", s.host, "--port", str(self.port),
               "--tp-size", str(s.tp_size), "--context-length", str(self.protocol.context_length),
               "--random-seed", str(self.protocol.decoding.seed), "--enable-metrics",
               "--kv-cache-dtype", dtype_flag(self.kind, "kv_cache", prec.kv_cache, SGLANG_KV_DTYPES, prec.weights),
               # the split of the pool between KV and recurrent state that the sizing assumed
               "--mamba-full-memory-ratio", str(s.mamba_full_memory_ratio)]
        if prec.state != "none":
            cmd += ["--mamba-ssm-dtype", dtype_flag(self.kind, "state", prec.state, SGLANG_STATE_DTYPES, prec.weights)]
        if s.mem_fraction_static:
            cmd += ["--mem-fraction-static", str(s.mem_fraction_static)]
        if s.disable_radix_cache:
            cmd.append("--disable-radix-cache")
        else:
            cmd += ["--mamba-scheduler-strategy", s.mamba_scheduler_strategy]
        return cmd + s.extra_args

    def output_length_fields(self, n: int) -> dict:
        return {"max_tokens": n, "min_tokens": n, "ignore_eos": True}

    def reset_prefix_cache(self, client: httpx.Client) -> str:
        try:
            r = client.post(self.base_url + "/flush_cache")
        except httpx.HTTPError as err:
            return f"not available ({err})"
        return "reset (POST /flush_cache)" if r.status_code == 200 else \
            f"not done (HTTP {r.status_code}: SGLang refuses while requests run or wait)"

    def server_info(self) -> dict:
        """/server_info (SGLang 0.5.6 on), else its older name /get_server_info."""
        for path in ("/server_info", "/get_server_info"):
            try:
                r = httpx.get(self.base_url + path, timeout=5)
                if r.status_code == 200:
                    return r.json()
            except (httpx.HTTPError, ValueError):
                continue
        return {}

    def identity(self) -> dict:
        return {"engine": "SGLang", "version": self.server_info().get("version", "unknown"),
                "chat_template_sha256": chat_template_sha256(self.artifacts.hf_dir if self.artifacts else None)}

    def realized_capacity(self) -> dict:
        return parse_sglang_capacity("".join(self.log_lines))

    # -- set-up -----------------------------------------------------------------------------
    install_label = "SGLang install"

    @classmethod
    def install(cls, ctx: InstallContext) -> None:
        require_gpu()
        gpu_env(ctx, cls.env_name, "import sglang", f"sglang=={SGLANG_VERSION}")
