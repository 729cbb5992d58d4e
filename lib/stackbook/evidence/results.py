"""The arm's results.json, typed: one model per section (sizing, canaries, sweep), validated
when a section is written, and the model of a sweep point's summary.

What is stable is typed; engine-specific dictionaries (realized capacity, probe findings,
telemetry) stay open, and every model keeps keys it does not name, so a section can grow
without breaking the runs already committed.
"""
from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

from stackbook.evidence.capacity_record import CapacityResults
from stackbook.evidence.label import Label, arm_label

Number = Union[int, float]  # an int stays an int in the file, a float a float


class Open(BaseModel):
    """A record that keeps the keys it does not name."""
    model_config = ConfigDict(extra="allow")


class Unknown(BaseModel):
    """A field not known says so, with the reason; nothing is left silently blank."""
    model_config = ConfigDict(extra="forbid")
    unknown: str


# --- sizing -------------------------------------------------------------------------------------

class SizingGeometry(Open):
    name: str | None = None
    architecture: str | None = None
    parameters: int | None = None
    layers: int | None = None
    full_attention_layers: int | None = None
    sliding_window_layers: int | None = None
    linear_attention_layers: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    mla: bool | None = None
    experts: int | None = None
    trained_context: int | None = None
    source: str | None = None


class SizingHardware(Open):
    name: str
    memory_bytes: Number
    bandwidth_bytes_s: Number | None = None
    source: str


class SizingResults(Open):
    """10_sizing: the memory arithmetic, the engine's own rule applied to it, and what the engine
    reported. A managed endpoint has nothing to size: then only `note` is set."""
    note: str | None = None
    geometry: SizingGeometry | None = None
    hardware: SizingHardware | None = None
    context: int | None = None
    weights_precision: str | None = None
    kv_precision: str | None = None
    state_precision: str | None = None
    weights_bytes: Number | None = None
    kv_bytes_per_token: Number | None = None
    state_bytes_per_sequence: Number | None = None
    bytes_per_sequence: Number | None = None
    cache_pool_bytes: Number | None = None
    max_live_sequences: int | None = None
    fits: bool | None = None
    roofline_decode_tok_s: Number | None = None
    predicted_capacity: dict[str, Any] = Field(default_factory=dict)
    realized_capacity: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _note_or_budget(self):
        if self.note is None and self.max_live_sequences is None:
            raise ValueError("a sizing section holds either the budget (max_live_sequences, ...) or a note "
                             "saying why nothing was sized")
        return self


# --- canaries -----------------------------------------------------------------------------------

class CheckResult(Open):
    id: str
    kind: str
    passed: bool
    capability: str | None = None
    out_of_scope: str | None = None  # the campaign's reason, when the check's capability does not gate
    expected_failure: str | None = None  # runs recorded before the gate was the campaign's
    output: str | None = None
    detail: Any = None


class CheckOutcome(Open):
    """One check as the passport lists it: name, kind and outcome."""
    id: str
    kind: str
    capability: str | None = None
    gating: bool
    outcome: str
    failure: str | None = None  # the failure's class (gate.canaries.FAILURE_CLASSES); None: passed


class FailureCounts(Open):
    """Checks run and failed, and each failure by its one class."""
    checks: int = 0
    failed: int = 0
    admission_rejected: int = 0
    length_truncated: int = 0
    schema_or_tool_failure: int = 0
    completed_but_wrong: int = 0
    request_failed: int = 0


class CanaryCounts(Open):
    """The gating checks and the declared out-of-scope ones, counted apart (runs recorded before
    carry the four gating counts alone, flat)."""
    gating: FailureCounts | None = None
    out_of_scope: FailureCounts | None = None


class CanaryResults(Open):
    """20_canaries: the verdict of the suite at temperature 0, and the capability probe."""
    verdict: Literal["PASS", "HOLD"]
    suite: str
    suite_version: int | None = None
    suite_sha256: str
    gating_checks: int
    passed: int
    failed: list[str]
    reason: str | None = None  # why the verdict is what it is (e.g. every request refused)
    out_of_scope: dict[str, str] = Field(default_factory=dict)  # check id -> the campaign's reason
    checks: list[CheckOutcome] = Field(default_factory=list)
    expected_failures: list[str] = Field(default_factory=list)  # runs recorded before
    unexpected_passes: list[str] = Field(default_factory=list)
    counts: CanaryCounts
    results: list[CheckResult] = Field(default_factory=list)
    probe: dict[str, Any] = Field(default_factory=dict)


# --- sweep --------------------------------------------------------------------------------------

class CpuSeconds(Open):
    """CPU seconds (user + system) spent during a point by the client process and by each process
    of the engine's group, by role (vLLM: api_server, engine_core; llama_server; mlx_lm_server;
    an unknown process under its own name)."""
    client: Number
    engine: dict[str, Number] = Field(default_factory=dict)


class EngineHostCounters(Open):
    """The engine's page faults and context switches during a point, its whole process group."""
    minor_faults: int
    major_faults: int
    voluntary_ctx_switches: int
    involuntary_ctx_switches: int


class EngineTimeMs(Open):
    """The engine's own mean time per request in each phase over a point (ms); None where the
    engine does not export that phase (llama-server has no queue time)."""
    queue: Number | None = None
    prefill: Number | None = None
    decode: Number | None = None
    inference: Number | None = None
    requests: int | None = None
    source: str


class SlotLoop(Open):
    """The engine's loop over a point by its own clock (measure.slot_loop): its phases' ms between
    the first and last timing blocks it logged inside the point, and the runtime's CPU seconds."""
    passes: int
    pre_decode_ms: Number
    decode_ms: Number
    post_decode_ms: Number
    runtime_share: Number = Field(description="(pre_decode + post_decode) / the three: the loop outside the kernels")
    main_thread_s: Number = Field(description="CPU seconds the engine's main thread (the loop and ggml's thread 0) ran")
    runtime_s: Number = Field(description="runtime_share x main_thread_s: the runtime's seconds in the point")
    requests: int
    source: str


class WorkTokens(Open):
    """Prefill and decode work of a point, every request of it (warm-up and cool-down included)."""
    prompt_tokens: int
    generated_tokens: int
    cached_prompt_tokens: int = 0
    source: str


class SpecDecode(Open):
    drafts: int
    accepted_tokens: int
    draft_tokens: int | None = None
    accepted_length_mean: Number
    acceptance_rate: Number | None = None


class PointSummary(Open):
    """One load point: latencies from the measured requests, throughput inside the window."""
    requests: int
    completed: int
    errors: dict[str, int] = Field(default_factory=dict)
    level: str | None = None
    repetition: int | None = None
    concurrency: int | None = None
    rate: Number | None = None
    load: Number | None = None
    window_s: Number | None = None
    ttft_ms_mean: Number | None = None
    ttft_ms_p50: Number | None = None
    ttft_ms_p95: Number | None = None
    ttft_ms_p99: Number | None = None
    ttft_ms_ci95: Number | None = None
    tpot_ms_mean: Number | None = None
    tpot_ms_p50: Number | None = None
    tpot_ms_p95: Number | None = None
    tpot_ms_p99: Number | None = None
    tpot_ms_ci95: Number | None = None
    itl_ms_mean: Number | None = None
    itl_ms_p50: Number | None = None
    itl_ms_p95: Number | None = None
    itl_ms_p99: Number | None = None
    e2e_ms_mean: Number | None = None
    e2e_ms_p50: Number | None = None
    e2e_ms_p95: Number | None = None
    e2e_ms_p99: Number | None = None
    e2e_ms_ci95: Number | None = None
    output_tokens: int | None = None
    output_throughput_tok_s: Number | None = None
    request_throughput_rps: Number | None = None
    total_throughput_tok_s: Number | None = None
    slo_attainment: Number | None = None
    goodput_rps: Number | None = None
    in_flight_mean: Number | None = Field(None, description="measured requests (sentinels among them) in flight, "
                                          "time-weighted over the measurement window")
    engine_in_flight_mean: Number | None = Field(None, description="every request of the point in flight over the "
                                                 "window, warm-up and cool-down included: what the engine held")
    client_gap_in_flight: Number | None = None  # closed loop: clients between a reply and their next send
    client_gap_ms_p99: Number | None = None
    schedule_lag_ms_p99: Number | None = None
    schedule_lag_in_flight: Number | None = Field(None, description="sends held back past their deadlines by the "
                                                  "client, time-weighted over the window")
    scheduled_rate_rps: Number | None = None
    achieved_rate_rps: Number | None = None
    decode_tok_s_per_stream_mean: Number | None = None
    decode_tok_s_per_stream_ci95: Number | None = None
    length_not_honoured: int | None = None
    littles_law_concurrency: Number | None = None
    client_cpu_fraction: Number | None = Field(None, description="the busiest client process's share of one core")
    client_processes: int | None = Field(None, description="client processes the point's requests were dealt to")
    client_cpu_fraction_by_process: list[Number] = Field(default_factory=list)
    steady_state: dict | None = Field(None, description="TTFT and requests in flight over time slices of the "
                                      "window, their Theil-Sen trends, and the verdict (measure.steady_state)")
    queue_grew: bool | None = Field(None, description="an open loop's queue grew over the window: over-saturated, "
                                    "outside the SLO whatever its percentiles (None: a "
                                    "closed loop, or too few requests)")
    requests_sent: int | None = None
    bodies_sha256: str | None = Field(None, description="sha256 of the exact bodies sent (requests_sent.jsonl.gz)")
    prompts_sha256: str | None = Field(None, description="sha256 of the prompts alone, the engine's dialect left out")
    decoding_sent: list[dict[str, Any]] = Field(default_factory=list)
    phases_sent: dict[str, int] = Field(default_factory=dict, description="requests sent per phase: the executed "
                                        "warm-up, measurement window and cool-down")
    output_tokens_server_mean: Number | None = Field(None, description="realized output length of the measured "
                                                     "replies, by the server's usage counts")
    # Runtime evidence (measure.runtime): readings at the point's start and end, every request of
    # the point inside them. Absent from runs recorded before it existed.
    cpu_seconds: CpuSeconds | None = None
    cpu_window_s: Number | None = Field(None, description="wall seconds between the two process readings")
    requests_in_cpu_window: int | None = Field(None, description="requests completed between the readings, "
                                               "every phase: the completions of the utilisation law")
    engine_host_counters: EngineHostCounters | None = None
    engine_threads: dict[str, int] = Field(default_factory=dict, description="threads per engine role at the end")
    engine_time_ms: EngineTimeMs | None = None
    queue_time_cv: Number | None = Field(None, description="CV of the engine's queue time, from its buckets")
    batch_size_mean: Number | None = Field(None, description="N_batch: mean requests running (engine gauge)")
    waiting_mean: Number | None = Field(None,
                                        description="mean requests waiting for the batch (the engine's queue gauge)")
    tokens_per_step_mean: Number | None = Field(None, description="tokens per engine step (from the engine's step "
                                                "histogram)")
    work_tokens: WorkTokens | None = None
    slot_loop: SlotLoop | None = Field(None, description="the loop's runtime and kernels by the engine's clock "
                                       "(None: the point was shorter than the 5 s between its timing blocks)")
    spec_decode: SpecDecode | str | None = None
    discarded: bool = False


class PointValidity(Open):
    """Whether the client delivered the load the protocol asked for (see measure.validity)."""
    valid: bool


class Discard(BaseModel):
    point: str
    rule: Literal["max_failed_fraction", "on_engine_restart", "on_invalid_load", "max_wrong_fraction"]
    detail: str


class SweepResults(Open):
    """30_load_sweep: every point's summary, its load validity, discards and error counts."""
    points: dict[str, PointSummary]
    discards: list[Discard] = Field(default_factory=list)
    discard_rules: dict[str, Any] = Field(default_factory=dict)
    telemetry: dict[str, Any] = Field(default_factory=dict)
    peak_engine_rss_gib: Number | None = None
    error_counts: dict[str, Any] = Field(default_factory=dict)
    length_control: dict[str, Any] = Field(default_factory=dict)
    load_validity: dict[str, PointValidity] = Field(default_factory=dict)
    load_check_counts: str | None = Field(None, description="which requests both sides of the load check "
                                          "counted (absent in runs recorded before it was stated)")
    decode_tok_s_per_stream_median: Number | None = None
    gpu_telemetry: dict[str, Any] = Field(default_factory=dict)
    client_warnings: list[str] = Field(default_factory=list, description="points whose busiest client process "
                                       "neared one core, with the setting that spreads the load")
    prefix_cache: dict[str, Any] = Field(default_factory=dict)
    engine_lifecycle: dict[str, Any] = Field(default_factory=dict, description="start-up (ready_after_s) and "
                                             "restarts, apart from the steady-state points")
    label: Label | None = None

    def points_discarded(self) -> list[bool]:
        return [p.discarded for p in self.points.values()]


class ArmResults(Open):
    """results.json: the sections the arm's notebooks have written so far."""
    sizing: SizingResults | None = None
    canaries: CanaryResults | None = None
    sweep: SweepResults | None = None
    capacity: CapacityResults | None = None

    def label(self, *, engine_died: bool = False, comparable: bool = True) -> Label:
        return arm_label(self.canaries.verdict if self.canaries else None,
                         self.sweep.points_discarded() if self.sweep else None,
                         engine_died=engine_died, comparable=comparable)


SECTIONS: dict[str, type[BaseModel]] = {"sizing": SizingResults, "canaries": CanaryResults, "sweep": SweepResults,
                                        "capacity": CapacityResults}


def validate_section(section: str, data) -> BaseModel:
    """The section checked against its model; an unknown section name is a mistake to name."""
    if section not in SECTIONS:
        raise ValueError(f"results.json has no section {section!r}; the sections are {sorted(SECTIONS)}")
    return SECTIONS[section].model_validate(data)
