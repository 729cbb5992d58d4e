"""What an engine kind states about itself for the measurement and the analysis: the processes
it runs and the resource centre each belongs to, the metric series it exports, and what the
00_decide shortlist knows of it. Each adapter declares these; the registry gathers them, so no
module outside engines/ needs to know an engine by name."""
from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from stackbook.host import FLOAT_FORMAT_FLAGS
from stackbook.engines.knobs import Knob

Centre = Literal["front end", "scheduler", "compute"]

# Every kind's A/A knob: a name on the arm, the same engine either way (the search's accept check).
AA_LABEL = Knob(name="arm label", layer="host execution", values=("a", "b"), default="a", control=True,
                what="A/A: the arm's name only; the engine runs the same either way")


class ProcessRole(BaseModel):
    """One process of an engine, known by what it calls itself (its name or command line), and the
    resource centre its CPU seconds belong to in the demand map."""
    model_config = ConfigDict(frozen=True)

    pattern: str  # a regular expression searched in the process name and in its command line
    role: str  # the stable name the runtime evidence records its CPU seconds under
    # The centre its CPU seconds go to. A compute role computes unless the role it
    # schedules_beside is present too: then that one computes and this one schedules.
    centre: Centre | None = None
    schedules_beside: str | None = None  # the compute role beside which this one only schedules
    serves_http: bool = False  # one process: its HTTP threads are counted in its compute seconds
    # ... unless they are told apart: threads (not the main one) born this soon after the process,
    # before its model loads, serve HTTP (llama-server's: its HTTP pool and listener, its log
    # writer, its stream-session collector); their CPU seconds are recorded under `http_role`.
    http_threads_born_within_s: float | None = None
    why_m: str | None = None  # why its centre holds m = 1 (front end, scheduler)
    measured_as: str | None = None  # how its centre's demand is measured (front end, scheduler)

    @property
    def http_role(self) -> str:
        """The role its HTTP threads' CPU seconds are recorded under, where they are told apart."""
        return f"{self.role}.http"


class MetricSeries(BaseModel):
    """The metric series an engine exports that the measurement reads, each a fragment of a
    Prometheus name (matched inside, or at the end of, the exported name)."""
    model_config = ConfigDict(frozen=True)

    kept: tuple[str, ...] = ()  # what a point's telemetry keeps (counter increases, final gauges)
    bucketed: tuple[str, ...] = ()  # histograms whose bucket increases are kept (for their spread)
    gauges: tuple[str, ...] = ()  # what the sampler reads while a point runs
    batch_gauges: tuple[str, ...] = ()  # the running-requests gauge: the batch N_batch
    queue_gauges: tuple[str, ...] = ()  # the waiting-requests gauge: requests queued for the batch
    # The per-request histograms (seconds) by the phase of a request each one times.
    phase_histograms: dict[str, str] = {}
    phase_source: str | None = None  # how the engine time read from those histograms is labelled
    timings_source: str | None = None  # how the engine time read from its per-request timings is labelled
    latency_histograms: dict[Literal["ttft", "itl"], str] = {}  # the engine's own TTFT and ITL (seconds)
    step_tokens_histogram: str | None = None  # tokens per engine step: the batch in tokens
    prompt_token_counters: tuple[str, ...] = ()  # the prefill work: prompt tokens processed
    generated_token_counters: tuple[str, ...] = ()  # the decode work: tokens generated
    # Speculative decoding: the counters of drafts, accepted tokens and draft tokens proposed.
    spec_decode_counters: dict[Literal["drafts", "accepted_tokens", "draft_tokens"], str] = {}
    cache_hit_counters: tuple[str, ...] = ()  # full names of the prefix-cache hit counters
    cache_query_counters: tuple[str, ...] = ()  # and of the lookups they are a share of


class DecisionFacts(BaseModel):
    """What the research notes found an engine offers for each workload dimension, in its flags
    and docs (None: the notes do not establish it, so the campaign must check it), under the name
    the shortlist gives the stack. The shortlist lists the stacks that qualify in the registry's
    order: a kind states no place among the others."""
    model_config = ConfigDict(frozen=True)

    stack: str
    parallel: str | None = None
    long_context: str | None = None
    reasoning: str | None = None
    images: str | None = None
    structured_output: str | None = None
    prefix_cache: str | None = None


# Where the decision facts of the kinds come from: research notes on the GPU engines (vLLM v0.33.0,
# SGLang v0.5.23, TensorRT-LLM PyTorch backend, llama.cpp server README), flags and defaults as each
# release documents them.


def local_runner_reason(answers) -> str:
    """Why a local runner fits these answers (Apple silicon): the seed pairs it with one user."""
    if answers.concurrent_users <= 1:
        return "one machine, one user: a local runner is the seed's answer"
    return (f"{answers.concurrent_users} concurrent users: the seed pairs local runners with one user, so the load "
            "sweep must show they hold")


# A kind that computes on a GPU: every float precision there, whatever this CPU's flags say (bf16
# needs an Ampere or later card: a campaign for an older one names fp16).
ON_THE_GPU: dict[str, tuple[str, ...]] = {"bf16": (), "fp16": (), "fp32": ()}


class EngineKindFacts:
    """The facts every engine adapter states about its kind, with the defaults of a kind that
    states none; the adapter's class attributes override them."""
    needs_gpu: ClassVar[bool] = False  # it serves only on an accelerator: the GPU check inspects its install
    runs_on: ClassVar[str | None] = None  # where it serves, where that is neither just this CPU nor just a GPU
    distributions: ClassVar[tuple[str, ...]] = ()  # the packages whose installed versions the GPU check reads
    process_roles: ClassVar[tuple[ProcessRole, ...]] = ()
    # How its log times its loop's phases (measure/slot_loop.py reads them); None: it does not.
    step_timings_source: ClassVar[str | None] = None
    metric_series: ClassVar[MetricSeries] = MetricSeries()
    decision: ClassVar[DecisionFacts | None] = None  # None: 00_decide's shortlist never names it
    # What its prefix cache keeps, so what a request can reuse (None: the kind does not say).
    prefix_cache_policy: ClassVar[str | None] = None
    # Per float precision, the ISA flags any one of which gives the kind native kernels for it (()
    # on every host; a precision left out is emulated everywhere). The default is the CPU's own
    # rule, as torch's kernels follow it; protocol.precision `native` picks from these.
    native_precisions: ClassVar[dict[str, tuple[str, ...]]] = FLOAT_FORMAT_FLAGS
    # The settings `stackbook search` may change, each named where a campaign sets it, with its layer.
    search_knobs: ClassVar[tuple[Knob, ...]] = (AA_LABEL,)
    # The knobs the search's step model reads (slots, threads); None: the kind is not searched on a
    # live engine yet, the model having no term for what its knobs do.
    search_model_knobs: ClassVar[tuple[str, str] | None] = None

    @classmethod
    def shortlist_reason(cls, answers) -> str | None:
        """Why 00_decide's shortlist names this kind for these answers; None when it does not."""
        return None

    @classmethod
    def cpu_flags_in_log(cls, log_text: str) -> list[str]:
        """The CPU features the engine's own log says it runs with (empty: it says none), for runs
        whose records predate the host's flags."""
        return []
