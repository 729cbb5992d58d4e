"""One point of the load sweep, in two named steps: `measure_point` sends it by the arm's meter
(measure.point_meter) and reads the engine around it; `point_figures` turns its records and
readings into the point's summary.
The sweep (measure/sweep.py) only orders points, skips finished ones and keeps the books."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from stackbook.gate.sentinels import judge_sentinels
from stackbook.loadgen.client_processes import ClientCost
from stackbook.loadgen.drivers import Target
from stackbook.loadgen.load_point import Load, LoadPoint
from stackbook.loadgen.phases import Phase
from stackbook.loadgen.plans import ClosedPlan
from stackbook.measure.arm_session import LiveArm
from stackbook.measure.input_lengths import input_length_match
from stackbook.measure.metrics import client_gaps, point_summary
from stackbook.measure.point_meter import PointMeter
from stackbook.measure.prefix_cache import cache_counters
from stackbook.measure.reconciliation import reconcile_with_engine
from stackbook.measure.runtime import read_processes, runtime_evidence
from stackbook.measure.session_order import session_order
from stackbook.measure.shared_prefix_reuse import reported_hit_rate
from stackbook.measure.slot_loop import blocks_since, log_size, main_thread_seconds, slot_loop_window
from stackbook.measure.telemetry import metrics_delta, scrape_metrics
from stackbook.measure.validity import client_cpu_warning


@dataclass
class SweepInstruments:
    """What stays open across a sweep's points: the meter that sends them (the engine's address,
    the record writers, the progress bar), the engine's process, and the samplers."""
    meter: PointMeter
    pid: int | None
    gauges: object
    gpu: object
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


class EngineWindow:
    """The engine read just before a point's first request and just after its last: its counters
    (each replica's, behind a router) before, and its processes' CPU on both sides."""

    def __init__(self, session: LiveArm, target: Target, group: int | list[int] | None) -> None:
        self.session, self.target, self.group = session, target, group
        routing = session.routing
        self.roles = session.adapter.process_roles + (routing.process_roles if routing else ())
        # One engine's log times its loop (replicas behind a router each keep their own: not read).
        # The arm's log, whoever started the engine: a notebook measuring the runner's engine holds
        # an adapter attached to it, with no log of its own.
        self.step_source = session.adapter.step_timings_source
        self.step_log = session.arm_dir.engine_log if self.step_source and not routing else None
        self.loop_blocks: list = []

    def counters(self):
        """A reading of the engine's counters (behind a router: the router's, each replica's within)."""
        routing, target = self.session.routing, self.target
        if routing:
            return routing.read(target.headers)
        return scrape_metrics(target.base_url, self.session.adapter.metrics_path, target.headers)

    def engines(self, reading) -> dict:
        """The engines' counters in a reading."""
        return reading.engines if self.session.routing else reading

    def __enter__(self) -> EngineWindow:
        self.reading0 = self.counters()
        self.procs0 = read_processes(self.group, self.roles)
        self.log0 = log_size(self.step_log)
        self.wall0, self.unix0 = time.perf_counter(), time.time()
        return self

    def __exit__(self, kind, *_) -> None:
        if kind is None:
            self.procs1, self.wall1 = read_processes(self.group, self.roles), time.perf_counter()
            self.loop_blocks = blocks_since(self.step_log, self.log0)

    def slot_loop(self, requests: int) -> dict | None:
        """The engine's loop over the point by its own clock (measure.slot_loop), where it logs one."""
        return slot_loop_window(self.loop_blocks, main_thread_seconds(self.procs0, self.procs1), requests,
                                self.step_source)


def measure_point(tools: SweepInstruments, point: LoadPoint) -> PointReadings:
    """Send one point (a new attempt, from its start) and read the engine before and after it:
    its counters, its gauges and GPU during, its processes' CPU, and the prefix cache's state."""
    meter = tools.meter
    session = meter.session
    series, routing = session.adapter.metric_series, session.routing
    window = EngineWindow(session, meter.target, tools.group or tools.pid)
    sent = meter.send(point, around=window)
    recs, cost, cache = sent.records, sent.cost, sent.cache
    window.procs1["client"]["cpu_s"] += cost.elsewhere_s()
    warning = client_cpu_warning(point.name, cost.busiest_fraction(), meter.processes)
    reading1 = window.counters()
    telemetry = metrics_delta(window.engines(window.reading0), window.engines(reading1))
    during = tools.gauges.window(window.unix0, time.time())
    server_side = {
        "repetition_began": tools.began or "not recorded",
        "prefix_cache": cache | cache_counters(telemetry, recs, series, cache.get("salt_tokens", 0)),
        "engine_gauges_during": during,
        "gpu_during": tools.gpu.window(window.unix0, time.time()),
        "engine_reconciliation": reconcile_with_engine(telemetry, recs, series),
        **runtime_evidence(window.procs0, window.procs1, window.wall1 - window.wall0, telemetry, recs, during,
                           series)}
    if window.step_log is not None:
        server_side["slot_loop"] = window.slot_loop(server_side["requests_in_cpu_window"])
    if routing:
        server_side["routing"] = routing.point_evidence(window.reading0, reading1, recs)
    return PointReadings(telemetry, server_side, cost, warning, recs)


def realized_output_tokens(records) -> float | None:
    """Mean output length of the measured, completed replies by the server's own usage counts
    (None where the server reports none): what the engine really generated, for fairness."""
    counts = [r.output_tokens_server for r in records
              if r.phase == Phase.MEASURE and r.ok and r.output_tokens_server is not None]
    return sum(counts) / len(counts) if counts else None


def with_implied_reuse(prefix_cache: dict, records: list, implied: dict) -> dict:
    """A point's prefix-cache readings with the reuse its trace implies beside them; for an agent
    trace's subagents, at each session depth, beside what the replies at that depth reported."""
    out = prefix_cache | {"implied_hit_rate": implied["hit_rate"]}
    if len(implied.get("by_depth") or {}) > 1:
        out |= {"implied_mean_hit_rate": implied["mean_hit_rate"], "implied_by_depth": {
            str(d): {k: x[k] for k in ("requests", "hit_rate", "mean_hit_rate")}
            | {"reported_hit_rate": reported_at_depth(records, implied.get("depth_of") or [], d)}
            for d, x in implied["by_depth"].items()}}
    return out


def reported_at_depth(records: list, depth_of: list[int], depth: int) -> float | None:
    """The cached prompt tokens the replies to one session depth's measured steps reported, over
    their prompt tokens (None where no reply at that depth reported any)."""
    mine = [r for r in records if r.phase == Phase.MEASURE and r.request_index < len(depth_of)
            and depth_of[r.request_index] == depth]
    return reported_hit_rate(mine)


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
        s["prefix_cache"] = with_implied_reuse(s["prefix_cache"], records, implied)
    s.update(sent)
    s["output_tokens_server_mean"] = realized_output_tokens(records)
    if trace_lengths is not None:
        s["input_lengths"] = input_length_match(trace_lengths, records)
    if steps := protocol.arrival.session_steps():  # a replayed log's sessions, checked from the records
        s["session_order"] = session_order(records, steps, protocol.arrival.session_links())
    return s
