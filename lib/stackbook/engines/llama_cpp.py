"""llama.cpp's llama-server, built from the source vendored in the llama-cpp-python sdist."""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import ClassVar, Literal

import httpx
from pydantic import Field

from stackbook import sizing
from stackbook.engines.base import EngineAdapter
from stackbook.engines.capacity import capacity_limit, parse_int, smallest_limit
from stackbook.engines.facts import AA_LABEL, DecisionFacts, MetricSeries, ProcessRole, local_runner_reason
from stackbook.engines.index_download import PinnedFile
from stackbook.engines.knobs import Knob
from stackbook.engines.install import InstallContext
from stackbook.engines.llama_cpp_build import install_server
from stackbook.engines.spec import CapacityBasis, EngineSpec
from stackbook.evidence.files import file_sha256
from stackbook.host import cpu_flags_line
from stackbook.locations import cache_dir

LLAMA_CPP_VERSION = "0.3.36"  # the llama-cpp-python sdist whose vendored llama.cpp is built
LLAMA_CPP_SDIST = PinnedFile("llama-cpp-python", LLAMA_CPP_VERSION, f"llama_cpp_python-{LLAMA_CPP_VERSION}.tar.gz",
                             "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e")

LLAMA_KV_CACHE = (r"llama_kv_cache: size =\s*(?P<mib>[\d.]+) MiB \(\s*(?P<cells>\d+) cells,\s*(?P<layers>\d+) layers,"
                  r"\s*(?P<used>\d+)/(?P<seqs>\d+) seqs\)(?:, K \((?P<ktype>\w+)\))?")
LLAMA_SYSTEM_INFO = r"system_info: (?P<threads>.*?) \| (?P<cpu>CPU : .*?)\s*\|?\s*$"


def llama_cpu_features(system_info: str) -> list[str]:
    """The CPU features llama.cpp says it was built with and uses ("AVX512 = 1 | AMX_INT8 = 1")."""
    return [name.strip() for name, value in
            (part.split("=", 1) for part in system_info.removeprefix("CPU :").split("|") if "=" in part)
            if value.strip() == "1"]


CACHE_TYPES = {"bf16": "bf16", "fp16": "f16", "fp32": "f32", "q8_0": "q8_0", "q4_0": "q4_0"}


class LlamaCppEngine(EngineSpec):
    kind: Literal["llama_cpp"]
    speculative_flags: ClassVar[tuple[str, ...]] = ("--model-draft", "-md", "--hf-repo-draft", "-hfd", "--spec-replace")
    pool_set_by: ClassVar[tuple[str, ...]] = ("engine.parallel", "protocol.context_length")  # a KV stream per slot
    managed_flags: ClassVar[dict[str, str]] = {
        "-m": "model (model.gguf_path)", "--model": "model (model.gguf_path)", "--alias": "model.name",
        "--host": "engine.host (with engine.expose)", "--port": "engine.port",
        "-c": "protocol.context_length (times engine.parallel)",
        "--ctx-size": "protocol.context_length (times engine.parallel)",
        "-np": "engine.parallel", "--parallel": "engine.parallel", "-kvu": "engine.parallel (one KV stream per slot)",
        "--kv-unified": "engine.parallel (one KV stream per slot)",
        "-t": "engine.threads", "--threads": "engine.threads", "-tb": "engine.threads",
        "--threads-batch": "engine.threads",
        "-ctk": "protocol.precision.kv_cache", "--cache-type-k": "protocol.precision.kv_cache",
        "-ctv": "protocol.precision.kv_cache", "--cache-type-v": "protocol.precision.kv_cache"}
    threads: int = Field(1, gt=0)
    parallel: int = Field(4, gt=0, description="slots: sequences decoded together")
    binary: str | None = None

    def sequences_at_once(self) -> int:
        return self.parallel

    def configured_capacity(self, protocol) -> dict:
        return {"slots": self.parallel, "context_per_sequence": protocol.context_length,
                "total_context_cells": protocol.context_length * self.parallel}

    def predicted_capacity(self, basis: CapacityBasis) -> dict:
        p = basis.protocol
        tokens = p.context_length * self.parallel
        kv_per_token = sizing.model_kv_bytes_per_token(basis.geometry, p.precision.kv_cache)
        return {"kv_tokens": tokens, "kv_cache_mib": tokens * kv_per_token / 2**20,
                "max_concurrency": self.parallel,
                "rule": "-c = context x slots; one KV stream of `context` cells per slot"}


def install_dir() -> Path:
    """The cached build: tied to this CPU's flags (GGML_NATIVE) and built with the server's own step
    timings (`timed`: DEBUG_TIMINGS, see LlamaCppAdapter.cmake_flags)."""
    cpu = hashlib.sha256(cpu_flags_line().encode()).hexdigest()[:12]
    return cache_dir() / "engines" / f"llama.cpp-{LLAMA_CPP_VERSION}-native-timed-{cpu}"


class LlamaCppAdapter(EngineAdapter):
    spec_model = LlamaCppEngine
    installs = "llama-server, built from source for this CPU"
    bootstrap_step = "llama"
    pinned_version = LLAMA_CPP_VERSION
    length_control = "ignore_eos (llama-server has no min_tokens)"
    # llama-server starts its HTTP pool (cpp-httplib's) before it loads the model; ggml's compute
    # threads are born with the model's warm-up, a third of a second later for the embedded one.
    process_roles = (ProcessRole(pattern=r"llama-server", role="llama_server", centre="compute",
                                 serves_http=True, http_threads_born_within_s=0.1),)
    step_timings_source = (  # built with DEBUG_TIMINGS (cmake_flags)
        "llama-server's slot-loop timings (DEBUG_TIMINGS: pre_decode + post_decode against decode, from the running "
        "means it logs every 5 s, each total taken as mean x passes: one decode and one post_decode a pass, as when "
        "a pass's batch fits in -b), over the CPU seconds its main thread ran")
    # ggml's CPU kernels: bf16 dot products need AVX512_BF16 (elsewhere each weight is widened
    # first), fp16 is converted by F16C inside AVX2's fused multiply-adds (tinyBLAS), fp32 anywhere.
    native_precisions = {"bf16": ("avx512_bf16",), "fp16": ("f16c",), "fp32": ()}
    metric_series = MetricSeries(
        kept=("prompt_tokens_total", "prompt_tokens_cached_total", "tokens_predicted_total", "prompt_tokens_seconds",
              "predicted_tokens_seconds",
              "requests_processing", "kv_cache_usage_ratio", "spec_decode_"),
        gauges=("kv_cache_usage", "requests_processing", "requests_deferred"),
        batch_gauges=("requests_processing",),
        queue_gauges=("requests_deferred",),
        timings_source="llama-server per-request timings (prompt_ms, predicted_ms)",
        prompt_token_counters=("prompt_tokens_total",), generated_token_counters=("tokens_predicted_total",),
        # prompt tokens served from the cache; prompt_tokens_total counts only those computed
        cache_hit_counters=("llamacpp:prompt_tokens_cached_total",),
        # llama-server exports these (llamacpp:spec_decode_num_*_total), zero without a draft model.
        spec_decode_counters={"drafts": "spec_decode_num_drafts_total",
                              "accepted_tokens": "spec_decode_num_accepted_tokens_total",
                              "draft_tokens": "spec_decode_num_draft_tokens_total"})
    search_knobs = (
        Knob(name="engine.threads", layer="kernels", values=(1, 2, 4), default=1,
             what="-t/-tb: the CPU threads ggml's kernels run on, for the batch and the prompt"),
        Knob(name="engine.parallel", layer="orchestration", values=(1, 2, 4, 8), default=4,
             what="-np: slots, the sequences decoded together"),
        Knob(name="--batch-size", layer="runtime", values=(512, 1024, 2048), default=2048,
             what="-b: the logical batch of prompt tokens a step takes"),
        Knob(name="--ubatch-size", layer="kernels", values=(128, 256, 512), default=512,
             what="-ub: the physical micro-batch one kernel call computes"),
        Knob(name="--flash-attn", layer="kernels", values=("auto", "on", "off"), default="auto",
             what="-fa: the fused attention kernel"),
        Knob(name="protocol.precision.kv_cache", layer="runtime", values=("fp16", "q8_0", "q4_0"), default="fp16",
             what="-ctk/-ctv: the KV cache's type (fewer bytes a token, some accuracy)"),
        AA_LABEL)
    search_model_knobs = ("engine.parallel", "engine.threads")
    decision = DecisionFacts(
        stack="llama.cpp",
        parallel="`-sm layer|row|tensor` splits across cards, by layers by default: not tensor parallel in vLLM's "
                 "sense",
        long_context="`-c` (0: the model's trained context); `--fit` shrinks an unset context to fit memory, so pin "
                     "it; each slot gets n_ctx / n_parallel without unified KV",
        reasoning=None,
        images=None,
        structured_output="per-request `json_schema` or `grammar` (GBNF)",
        prefix_cache="`cache_prompt`, on by default")
    prefix_cache_policy = ("per slot: a request reuses the longest prefix it shares with the last prompt of the slot "
                           "it is given (picked by prompt similarity); a prefix held only by another slot is "
                           "computed again")

    @classmethod
    def shortlist_reason(cls, answers) -> str | None:
        one_user = answers.concurrent_users <= 1
        if answers.platform == "apple":
            return ("Apple silicon with Metal: GGUF quants and a model registry's convenience; "
                    f"{local_runner_reason(answers)}")
        if answers.platform == "cpu":
            return ("CPU-only: quantized GGUF and hand-written CPU kernels"
                    + ("; one user needs no batching" if one_user else ""))
        if answers.platform == "nvidia" and one_user:
            return "one user at a keyboard: a local runner is enough, there is no batch to fill"
        return None

    @classmethod
    def installed_executable(cls) -> Path:
        return install_dir() / "bin" / "llama-server"

    @property
    def binary(self) -> Path:
        return Path(self.spec.binary) if self.spec.binary else self.installed_executable()

    @property
    def total_context(self) -> int:
        # -c is the context of all slots together: give each slot the protocol's context.
        return self.protocol.context_length * self.spec.parallel

    def command(self) -> list[str]:
        if self.artifacts is None or self.artifacts.gguf is None:
            raise FileNotFoundError("llama_cpp needs a GGUF: set model.gguf_path in the campaign")
        if self.spec.binary and not self.binary.exists():
            raise FileNotFoundError(f"engine.binary {self.spec.binary!r} does not exist; give the path of a "
                                    "llama-server binary, or leave binary unset to use the one set-up builds")
        if not self.binary.exists():
            raise FileNotFoundError(self.install_hint())
        kv = CACHE_TYPES.get(self.protocol.precision.kv_cache)
        if kv is None:
            raise ValueError(f"llama_cpp has no KV cache type for protocol.precision.kv_cache="
                             f"{self.protocol.precision.kv_cache!r}; use one of {sorted(CACHE_TYPES)}")
        slots_dir = Path(tempfile.gettempdir()) / "stackbook-llama-slots"
        slots_dir.mkdir(exist_ok=True)
        return [str(self.binary), "-m", str(self.artifacts.gguf), "--alias", self.served_name,
                "--host", self.spec.host, "--port", str(self.port),
                "-c", str(self.total_context), "--parallel", str(self.spec.parallel),
                "--threads", str(self.spec.threads), "--threads-batch", str(self.spec.threads),
                "--cache-type-k", kv, "--cache-type-v", kv,
                "--metrics", "--slots", "--jinja", "--no-webui", "-lv", "4",
                # enables the slot actions, among them erase (the prefix-cache flush); nothing is saved
                "--slot-save-path", f"{slots_dir}/",
                # the host-memory prompt cache outlives an erase: off, so each point starts empty
                *(["--cache-ram", "0"] if self._reuses_within_points() else []),
                *self.spec.extra_args]

    def _reuses_within_points(self) -> bool:
        """A cold protocol over prompts that re-send prefixes (a replayed log, or a workload's
        shared prefixes): each point starts empty and its requests may reuse what earlier ones of
        the point left, as in any engine."""
        return self.protocol.prefix_cache == "cold" and bool(
            self.protocol.arrival.implied_reuse() or getattr(self.protocol.workload, "shared_prefix", None))

    decoding_field_names = {"repetition_penalty": "repeat_penalty"}

    def sampling_fields(self, decoding: dict) -> dict:
        # llama-server applies top_k 40, min_p 0.05 and repeat_penalty unless told otherwise.
        return {"temperature": decoding["temperature"], "top_p": decoding["top_p"],
                "top_k": decoding["top_k"], "min_p": decoding["min_p"],
                "repeat_penalty": decoding["repetition_penalty"], "seed": decoding["seed"]}

    def output_length_fields(self, n: int) -> dict:
        return {"max_tokens": n, "ignore_eos": True}

    def prefix_cache_fields(self, state: str) -> dict:
        # Erasing the slots between points leaves the host-memory prompt cache, which hands every
        # request the chat template's shared opening: only a per-request switch makes cold real.
        return {"cache_prompt": False} if state == "cold" and not self._reuses_within_points() else {}

    def reset_prefix_cache(self, client: httpx.Client) -> str:
        slots = self.spec.parallel
        codes = []
        for i in range(slots):
            try:
                codes.append(client.post(f"{self.base_url}/slots/{i}?action=erase").status_code)
            except httpx.TimeoutException:  # a frozen server: the other slots would wait as long
                codes.append(0)
                break
            except httpx.HTTPError:
                codes.append(0)
        if 200 not in codes:
            return f"not available (HTTP {sorted(set(codes))})"
        # The host-memory prompt cache (--cache-ram) has no flush over HTTP; the replies'
        # cached_tokens show whether it served anything.
        return (f"erased {codes.count(200)}/{slots} slots (POST /slots/N?action=erase); "
                "the host-memory prompt cache cannot be flushed over HTTP")

    def props(self) -> dict:
        try:
            return httpx.get(self.base_url + "/props", timeout=5).json()
        except (httpx.HTTPError, ValueError):
            return {}

    def build_line(self) -> str | None:
        m = self.find_in_log(LLAMA_SYSTEM_INFO)
        return m["cpu"].strip() if m else None

    @classmethod
    def cpu_flags_in_log(cls, log_text: str) -> list[str]:
        m = re.search(LLAMA_SYSTEM_INFO, log_text, re.M)
        return [f.lower() for f in llama_cpu_features(m["cpu"])] if m else []

    def kernel_choice(self) -> dict:
        line = self.build_line()
        return {"backend": "ggml CPU", "cpu_features": llama_cpu_features(line)} if line else {}

    def identity(self) -> dict:
        try:
            version = subprocess.run([str(self.binary), "--version"], capture_output=True, text=True,
                                     timeout=10).stderr.strip()
        except (OSError, subprocess.TimeoutExpired) as err:
            version = f"unknown ({err})"
        props = self.props()
        template = props.get("chat_template") or ""
        return {
            "engine": "llama.cpp llama-server",
            "source": f"llama-cpp-python {LLAMA_CPP_VERSION} sdist, vendored llama.cpp",
            "version": version.splitlines()[0] if version else "unknown",
            "build": " ".join(version.splitlines()[1:2]) if version else "unknown",
            "binary_sha256": file_sha256(self.binary) if self.binary.exists() else None,
            "build_flags": "Release, GGML_NATIVE=ON (tied to this CPU), static",
            "chat_template_sha256": hashlib.sha256(template.encode()).hexdigest() if template else None,
            "threads": self.spec.threads,
            "parallel_slots": self.spec.parallel,
        }

    def realized_capacity(self) -> dict:
        out: dict = {"source": "llama-server log and /props"}
        m = self.find_in_log(LLAMA_KV_CACHE)
        unified = self.find_in_log(r"kv_unified = '(true|false)'")
        if m:
            cells, seqs = int(m["cells"]), int(m["seqs"])
            # Without a unified cache every sequence has its own `cells`; with one, they share them.
            per_seq = unified is None or unified.group(1) == "false"
            out.update(kv_cache_mib=float(m["mib"]), kv_cells=cells, kv_layers=int(m["layers"]), kv_streams=seqs,
                       kv_unified=not per_seq, kv_tokens=cells * seqs if per_seq else cells,
                       # under the protocol's name (f32 is fp32), so arms compare their KV precision alike
                       kv_type={v: k for k, v in CACHE_TYPES.items()}.get(m["ktype"], m["ktype"]),
                       kv_type_logged=m["ktype"])
        m = self.find_in_log(r"n_slots = (\d+)")
        if m:
            out["slots"] = int(m.group(1))
        m = self.find_in_log(r"n_ctx_slot = (\d+)") or self.find_in_log(r"new slot.*n_ctx = (\d+)") \
            or self.find_in_log(r"n_ctx_seq\s*=\s*(\d+)")
        if m:
            out["context_per_sequence"] = parse_int(m.group(1))
        props = self.props()
        if props:
            out["slots"] = props.get("total_slots", out.get("slots"))
        per_seq = out.get("context_per_sequence")
        kv_room = out["kv_tokens"] // per_seq if "kv_tokens" in out and per_seq else None
        configured = self.spec.configured_capacity(self.protocol)
        return out | smallest_limit({
            "sequence_cap": capacity_limit(out.get("slots"), configured["slots"], "llama-server /props total_slots"),
            "kv_blocks": capacity_limit(kv_room,
                                        configured["total_context_cells"] // configured["context_per_sequence"],
                                        "llama-server log: KV cells / context per slot"),
            "context": capacity_limit(per_seq, configured["context_per_sequence"], "llama-server log: n_ctx_slot",
                                      unit="tokens per sequence")})

    # -- set-up -----------------------------------------------------------------------------
    install_label = "llama-server build"
    builds_from_source = True
    # DEBUG_TIMINGS: the server times its slot loop's phases by its own clock (building the batch,
    # the model's decode, sampling and sending) and logs their running means every 5 s, which the
    # demand map reads to split the runtime from the kernels (measure/slot_loop.py).
    cmake_flags: ClassVar[tuple[str, ...]] = (
        "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_CXX_FLAGS=-DDEBUG_TIMINGS", "-DGGML_NATIVE=ON",
        "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_BUILD_SERVER=ON",
        "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_OPENSSL=OFF",
        "-DLLAMA_CURL=OFF")

    @classmethod
    def is_installed(cls) -> bool:
        return os.access(cls.installed_executable(), os.X_OK)

    @classmethod
    def install(cls, ctx: InstallContext) -> None:
        """Build llama-server from the llama.cpp the pinned llama-cpp-python sdist vendors, and
        keep its converter beside it (engines/llama_cpp_build.py)."""
        install_server(ctx, LLAMA_CPP_SDIST, cls.cmake_flags, install_dir())
