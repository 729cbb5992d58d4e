"""One point of the load sweep: its requests (`point_requests`), then two named steps: `measure_point`
sends it and reads the engine around it; `point_figures` turns its records and readings into the
point's summary.
The sweep (measure/sweep.py) only orders points, skips finished ones and keeps the books."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from stackbook.gate.sentinels import judge_sentinels, mix_sentinels
from stackbook.loadgen.client_processes import ClientCost, send_point
from stackbook.loadgen.load_point import Load, LoadPoint
from stackbook.loadgen.phases import Phase
from stackbook.loadgen.plans import ClosedPlan, PointPlan
from stackbook.loadgen.records import NOT_ANSWERED
from stackbook.loadgen.workload import recorded_prompts, synthetic_prompts
from stackbook.loadgen.prompt_salt import salt_point
from stackbook.measure.cache_split import salt_tokens
from stackbook.measure.input_lengths import input_length_match
from stackbook.measure.metrics import client_gaps, point_summary
from stackbook.measure.prefix_cache import cache_counters, prepare_point
from stackbook.measure.reconciliation import reconcile_with_engine
from stackbook.measure.runtime import read_processes, runtime_evidence
from stackbook.measure.session_order import session_order
from stackbook.measure.telemetry import metrics_delta, scrape_metrics
from stackbook.measure.validity import client_cpu_warning


class EngineFailure(RuntimeError):
    """The engine died or stopped answering: the sweep stops, its records stay for --resume."""


def not_answered(records) -> bool:
    """Every measured request failed as a gone or frozen engine fails them (or, where the clients
    stopped before any measured request, every warm-up did): the point says nothing of the
    engine's speed, and a resumed run measures it again."""
    measured = [r for r in records if r.phase == Phase.MEASURE] or [r for r in records if r.phase == Phase.WARMUP]
    return bool(measured) and all(r.error_class in NOT_ANSWERED for r in measured)


def check_engine(session, name: str, records: list | None = None) -> None:
    if not session.engine_alive():
        raise EngineFailure(f"the engine exited before point {name}")
    if records and not_answered(records):
        failed = next(r.error_class for r in records if r.phase in (Phase.MEASURE, Phase.WARMUP))
        raise EngineFailure(f"every request of point {name} failed ({failed}): the engine is not answering")


def cooldown_requests(protocol, level: dict) -> int:
    return protocol.arrival.cooldown_requests(level, protocol)


def point_requests(protocol, level: dict, n: int, seed: int, tokenizer, sentinels: list
                   ) -> tuple[list, PointPlan]:
    """One point's prompts, built before its readings start, in sending order, and the plan they
    are sent by (its arrival pattern's: deadlines or clients, with the cool-down). Where the
    pattern fixes the prompts' lengths (a trace) they are its own, without sentinels."""
    arrival, cooldown = protocol.arrival, cooldown_requests(protocol, level)
    lengths = arrival.prompt_lengths(level)
    prompt_seed = arrival.prompt_seed(level, seed)
    recorded = arrival.recorded_messages(level)
    if recorded is not None:  # a request log: its own messages, each reply at its recorded length
        prompts = recorded_prompts(recorded, [out for _, out in lengths], tokenizer)
    elif lengths is not None:
        prompts = synthetic_prompts(protocol.workload, tokenizer, len(lengths), seed=prompt_seed, lengths=lengths,
                                    blocks=arrival.prompt_blocks(level))
    else:
        prompts = mix_sentinels(synthetic_prompts(protocol.workload, tokenizer, n, seed=prompt_seed),
                                sentinels, protocol.warmup_requests, cooldown, protocol.canaries.sentinel_share)
    return prompts, arrival.point_plan(level, len(prompts), seed, cooldown)


@dataclass
class SweepInstruments:
    """What stays open across a sweep's points: the engine's address and process, the record
    writers, the samplers and the progress bar."""
    session: object
    run_id: str
    target: object
    tokenizer: object
    sentinels: list
    pid: int | None
    writer: object
    sent_writer: object
    gauges: object
    gpu: object
    bar: object
    began: str | None = None
    group: int | list[int] | None = None  # the processes read around a point (None: pid's group)


@dataclass
class PointReadings:
    """What one point measured beside its request records."""
    telemetry: dict
    server_side: dict
    cost: ClientCost
    warning: str | None = None
    records: list = field(default_factory=list)


def measure_point(tools: SweepInstruments, point: LoadPoint) -> PointReadings:
    """Send one point (a new attempt, from its start) and read the engine before and after it:
    its counters, its gauges and GPU during, its processes' CPU, and the prefix cache's state."""
    session, protocol, target = tools.session, tools.session.protocol, tools.target
    adapter, series = session.adapter, session.adapter.metric_series
    name, attempt = point.name, point.attempt
    check_engine(session, name)
    base = point.record_fields(tools.run_id, session.arm.name)
    prompts, plan = point_requests(protocol, point.load.level(), point.requests, protocol.seed_of(point.repetition),
                                   tools.tokenizer, tools.sentinels)
    routing = getattr(session, "routing", None)  # replicas behind a router (routing/): each flushed and read
    cache = (routing.prepare_point(protocol.prefix_cache, target, protocol.workload, tools.tokenizer) if routing
             else prepare_point(protocol.prefix_cache, adapter, target, protocol.workload, tools.tokenizer))
    prompts, salt = salt_point(protocol, tools.run_id, session.arm.name, name, attempt, prompts, tools.tokenizer)
    if salt:
        cache |= {"salt": salt, "salt_tokens": salt_tokens(salt, tools.tokenizer)}
    routed0 = routing.read(target.headers) if routing else None
    before = routed0.engines if routing else scrape_metrics(target.base_url, adapter.metrics_path, target.headers)
    roles = adapter.process_roles + (routing.process_roles if routing else ())  # read at the point's start and end
    procs0 = read_processes(tools.group or tools.pid, roles)
    wall0, unix0 = time.perf_counter(), time.time()
    recs, cost = send_point(plan, target, prompts, tools.tokenizer, processes=protocol.loadgen.processes,
                            parts_dir=session.arm_dir.client_parts, writer=tools.writer,
                            sent_writer=tools.sent_writer, base=base, warmup=protocol.warmup_requests,
                            progress=tools.bar, alive=session.engine_alive, engine_pid=tools.pid)
    procs1, wall1 = read_processes(tools.group or tools.pid, roles), time.perf_counter()
    procs1["client"]["cpu_s"] += cost.elsewhere_s()
    warning = client_cpu_warning(name, cost.busiest_fraction(), protocol.loadgen.processes)
    check_engine(session, name, recs)
    routed1 = routing.read(target.headers) if routing else None
    after = routed1.engines if routing else scrape_metrics(target.base_url, adapter.metrics_path, target.headers)
    telemetry = metrics_delta(before, after)
    during = tools.gauges.window(unix0, time.time())
    server_side = {
        "repetition_began": tools.began or "not recorded",
        "prefix_cache": cache | cache_counters(telemetry, recs, series, cache.get("salt_tokens", 0)),
        "engine_gauges_during": during,
        "gpu_during": tools.gpu.window(unix0, time.time()),
        "engine_reconciliation": reconcile_with_engine(telemetry, recs, series),
        **runtime_evidence(procs0, procs1, wall1 - wall0, telemetry, recs, during, series)}
    if routing:
        server_side["routing"] = routing.point_evidence(routed0, routed1, recs)
    return PointReadings(telemetry, server_side, cost, warning, recs)


def realized_output_tokens(records) -> float | None:
    """Mean output length of the measured, completed replies by the server's own usage counts
    (None where the server reports none): what the engine really generated, for fairness."""
    counts = [r.output_tokens_server for r in records
              if r.phase == Phase.MEASURE and r.ok and r.output_tokens_server is not None]
    return sum(counts) / len(counts) if counts else None


def point_figures(protocol, load: Load, repetition: int, records: list, *, readings: PointReadings | None,
                  earlier: dict | None, sentinels: list, sent: dict, trace_lengths, implied: dict | None) -> dict:
    """One point's summary from its latest attempt's records, with the readings taken while it
    ran (or, for a point measured by an earlier call, the server-side readings results.json kept)."""
    s = point_summary(records, protocol.slo)
    if readings is None:  # measured by an earlier call: its server-side readings stay
        s = {k: v for k, v in (earlier or {}).items() if k != "discarded"} | s
    s.update(load.fields(), repetition=repetition, level=load.label)
    s["load"] = load.value or s.get("achieved_rate_rps")  # what the arms are compared at
    if issubclass(protocol.arrival.plan_type, ClosedPlan):
        s.update(client_gaps(records))
    s["sentinels"] = judge_sentinels(records, sentinels)
    if readings is not None:
        s.update(readings.cost.summary())
        s.update(readings.server_side)
    if implied and isinstance(s.get("prefix_cache"), dict):  # beside the engine's realized hit rate
        s["prefix_cache"] = s["prefix_cache"] | {"implied_hit_rate": implied["hit_rate"]}
        if len(implied.get("by_depth") or {}) > 1:  # an agent trace's subagents: the rate at each depth
            s["prefix_cache"] |= {"implied_mean_hit_rate": implied["mean_hit_rate"], "implied_by_depth": {
                str(d): {k: x[k] for k in ("requests", "hit_rate", "mean_hit_rate")}
                for d, x in implied["by_depth"].items()}}
    s.update(sent)
    s["output_tokens_server_mean"] = realized_output_tokens(records)
    if trace_lengths is not None:
        s["input_lengths"] = input_length_match(trace_lengths, records)
    if steps := protocol.arrival.session_steps():  # a replayed log's sessions, checked from the records
        s["session_order"] = session_order(records, steps, protocol.arrival.session_links())
    return s
