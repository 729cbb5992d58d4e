"""The load sweep for one arm: every load level, repetitions, raw records, summaries."""
from __future__ import annotations

import statistics

from tqdm import tqdm

from stackbook.gate.canaries import load_suite
from stackbook.gate.sentinels import sentinel_checks
from stackbook.loadgen.client_processes import merge_parts
from stackbook.loadgen.load_point import Load, LoadPoint, point_name as named
from stackbook.loadgen.phases import Phase
from stackbook.loadgen.records import RecordWriter, read_records
from stackbook.loadgen.sent import SentWriter, point_digests, read_sent
from stackbook.loadgen.workload import ApproximateTokenizer, client_tokenizer
from stackbook.measure.input_lengths import trace_input_lengths
from stackbook.measure.metrics import LOAD_CHECK_COUNTS
from stackbook.measure.arm_session import LiveArm
from stackbook.measure.point_meter import PointMeter, arm_target, not_answered
from stackbook.measure.sweep_point import PointReadings, SweepInstruments, measure_point, point_figures
from stackbook.measure.telemetry import GaugeSampler, GpuSampler, RssSampler
from stackbook.measure.validity import apply_discard_rules, point_validity
from stackbook.measure.validity import with_client_delay  # the client-delay rule
from stackbook.model.artifacts import artifacts_for


def tokenizer_for(session: LiveArm):
    """The model's own tokenizer when its files are here, else an approximation (said so)."""
    try:
        art = artifacts_for(session.campaign.model)
    except FileNotFoundError:
        art = None
    if art and art.hf_dir and (art.hf_dir / "tokenizer.json").exists():
        return client_tokenizer(str(art.hf_dir))
    return ApproximateTokenizer()


def load_levels(protocol) -> list[dict]:
    """One entry per load level of the protocol's arrival pattern."""
    return protocol.arrival.load_levels()


def turns_of(protocol) -> int:
    return protocol.workload.turns()


def requests_at(protocol, level: dict) -> int:
    """Prompts (conversations, in a multi-turn workload) sent at this load level."""
    return protocol.arrival.prompts_at(level, protocol)


def point_name(level: dict, repetition: int) -> str:
    """A point's name: its load level and repetition, as its folder and every record name it."""
    return named(level["level"], repetition)


def sentinels_for(protocol) -> list:
    """The gating canary checks mixed into every point as sentinels (none without a suite)."""
    try:
        suite, _ = load_suite(protocol.canaries.suite)
    except FileNotFoundError:
        return []
    return sentinel_checks(suite, protocol.canaries.out_of_scope)


def schedule_for(protocol, level: dict, n: int, seed: int) -> list[float]:
    return protocol.arrival.schedule(level, n, seed)


def earlier_points(session: LiveArm) -> tuple[dict, dict]:
    """The points and telemetry an earlier call of this arm's sweep recorded (results.json)."""
    from stackbook.evidence.files import read_json

    sweep = (read_json(session.arm_dir.results, {}) or {}).get("sweep") or {}
    return sweep.get("points") or {}, sweep.get("telemetry") or {}


def run_sweep(session: LiveArm, run_id: str, progress: bool = True, repetitions: list[int] | None = None,
              began: str | None = None) -> dict:
    """Run the points of the given repetitions (None: the protocol's `min` repetitions);
    records go to requests.jsonl as they complete. Points already complete in requests.jsonl (an
    earlier repetition, a resumed run) are not run again, and their server-side evidence is carried
    over from results.json. The summary covers every repetition measured so far. `began` says how
    this call's repetitions began (a fresh engine start, or the engine left running).

    The bookkeeping lives here; each point is sent by sweep_point.measure_point (through the
    arm's point_meter.PointMeter) and summed up by sweep_point.point_figures."""
    protocol = session.protocol
    target = arm_target(session)
    tokenizer = tokenizer_for(session)
    records_path = session.arm_dir.requests
    loads = protocol.arrival.loads()
    reps = list(range(protocol.repetitions.min)) if repetitions is None else sorted(repetitions)
    keep_cut_attempt(session)
    todo = points_to_run(protocol, loads, reps, latest_attempts(read_records(records_path)))
    pid = session.engine.get("pid") or (session.adapter.proc.pid if session.adapter.proc else None)
    routing = session.routing
    group = routing.pids() if routing else pid  # replicas and router: every process read
    readings: dict[str, PointReadings] = {}
    bar = tqdm(total=len(reps) * protocol.requests_per_repetition(), desc=f"{session.arm.name} requests",
               disable=not progress)
    gauges = GaugeSampler(routing.replica_urls if routing else target.base_url, session.adapter.metrics_path)
    with RssSampler(group, keep=session.arm_dir.engine_samples) as rss, GpuSampler() as gpu, gauges, \
            RecordWriter(records_path) as writer, SentWriter(session.arm_dir.requests_sent) as sent_writer:
        target.on_send = sent_writer.write
        meter = PointMeter(session, run_id, target, tokenizer, writer, sent_writer, progress=bar,
                           sentinels=sentinels_for(protocol), processes=protocol.loadgen.processes, engine_pid=pid)
        tools = SweepInstruments(meter, pid, gauges, gpu, began, group)
        for point in todo:
            if point.finished:  # by an earlier call
                bar.update(point.requests * turns_of(protocol))
                continue
            # A point cut short is run again from its start as a new attempt; the records of
            # the cut attempt stay on disk but never enter the metrics.
            readings[point.name] = measure_point(tools, point)
            if readings[point.name].warning:
                bar.write(readings[point.name].warning)
        peak = rss.peak_bytes
        gpu_summary = gpu.summary()
    bar.close()
    return sweep_results(session, loads, reps, readings, meter.sentinels, tokenizer, peak, gpu_summary)


def keep_cut_attempt(session: LiveArm) -> None:
    """An interrupted point's per-process parts join the records, as a cut attempt."""
    if session.arm_dir.client_parts.is_dir():
        with RecordWriter(session.arm_dir.requests) as writer, SentWriter(session.arm_dir.requests_sent) as sent:
            merge_parts(session.arm_dir.client_parts, writer, sent)


def points_to_run(protocol, loads: list[Load], reps: list[int], attempts: dict) -> list[LoadPoint]:
    """The points in sending order; a point's attempt is None where an earlier call finished it,
    else the number of its new attempt."""
    out = []
    for rep in reps:
        for load in loads:
            n = requests_at(protocol, load.level())
            attempt, done = attempts.get(named(load.label, rep), (-1, 0))
            out.append(LoadPoint.in_sweep(load, rep, n, None if done >= n * turns_of(protocol) else attempt + 1))
    return out


def sweep_results(session: LiveArm, loads: list[Load], reps: list[int], readings: dict, sentinels: list, tokenizer,
                  peak_rss_bytes: int, gpu_summary: dict) -> dict:
    """Every measured point's figures (this call's and earlier calls'), then the arm's sweep
    summary: discards, error counts, length control, the engine's lifecycle and prefix cache."""
    protocol = session.protocol
    records = read_records(session.arm_dir.requests, latest_attempt=True)
    sent = point_digests(read_sent(session.arm_dir.requests_sent, latest_attempt=True))
    earlier, earlier_telemetry = earlier_points(session)
    telemetry = {name: r.telemetry for name, r in readings.items()}
    telemetry |= {name: earlier_telemetry[name] for name in earlier if name not in readings
                  and name in earlier_telemetry}
    # each level's trace lengths, counted once for all its repetitions (a long log is tokenized once)
    trace_lengths = {load.label: trace_input_lengths(protocol.arrival, load.level(), tokenizer) for load in loads}
    implied = protocol.arrival.implied_reuse()
    by_point: dict[str, list] = {}
    for r in records:
        by_point.setdefault(r.point, []).append(r)
    points: dict[str, dict] = {}
    for rep in sorted({r.repetition for r in records} | set(reps)):
        for load in loads:
            name = named(load.label, rep)
            if name in by_point:
                points[name] = point_figures(protocol, load, rep, by_point[name], readings=readings.get(name),
                                             earlier=earlier.get(name), sentinels=sentinels,
                                             sent=sent.get(name, {}), trace_lengths=trace_lengths[load.label],
                                             implied=implied)
    out = summarize_sweep(points, telemetry, peak_rss_bytes, protocol, harness_ceiling=session.harness_ceiling())
    method = session.adapter.length_control
    out["length_control"]["method"] = method or "none: this engine offers no way to force an exact length"
    if method is None:
        out["length_control"].update(controlled=False, honoured="not controlled: replies may end early")
    out["gpu_telemetry"] = gpu_summary
    out["client_warnings"] = [r.warning for r in readings.values() if r.warning]
    # Start-up and recovery are lifecycle costs, kept apart from the steady-state points.
    out["engine_lifecycle"] = {"ready_after_s": (session.engine or {}).get("ready_after_s"),
                               "restarts": (session.engine or {}).get("restarts")}
    out["prefix_cache"] = {"state": protocol.prefix_cache, "policy": session.adapter.prefix_cache_policy,
                           "points": {name: x["prefix_cache"] for name, x in points.items() if x.get("prefix_cache")}}
    return out


def latest_attempts(records) -> dict[str, tuple[int, int]]:
    """Per point: its latest attempt and how many usable records that attempt has. An attempt
    that the engine's death cut short, or that it never answered (frozen), counts as empty, so it
    is run again. Sentinels are extra to the workload's requests and do not count towards a
    point's completion."""
    out: dict[str, tuple[int, int]] = {}
    cut: set[tuple[str, int]] = set()
    by_attempt: dict[tuple[str, int], list] = {}
    for r in records:
        by_attempt.setdefault((r.point, r.attempt), []).append(r)
        a, n = out.get(r.point, (-1, 0))
        one = 0 if r.phase == Phase.SENTINEL else 1
        if r.attempt > a:
            out[r.point] = (r.attempt, one)
        elif r.attempt == a:
            out[r.point] = (a, n + one)
        if r.error_class == "engine_died":
            cut.add((r.point, r.attempt))
    cut |= {key for key, recs in by_attempt.items() if not_answered(recs)}  # the engine froze through it
    return {p: (a, 0 if (p, a) in cut else n) for p, (a, n) in out.items()}


def summarize_sweep(points: dict, telemetry: dict, peak_rss_bytes: int, protocol,
                    harness_ceiling: dict | None = None) -> dict:
    errors: dict[str, int] = {}
    for s in points.values():
        for k, v in s.get("errors", {}).items():
            errors[k] = errors.get(k, 0) + v
    short = sum(s.get("length_not_honoured", 0) for s in points.values())
    as_json = protocol.workload.response_format == "json_schema"
    completed = sum(s.get("completed", 0) for s in points.values())
    load_validity = {name: point_validity(s, harness_ceiling, plan=protocol.arrival.judged_plan)
                     for name, s in points.items()}
    # The client's own event-loop delay (measure.validity.client_delay_validity): a point it would distort is invalid.
    load_validity = {name: with_client_delay(v, points[name]) for name, v in load_validity.items()}
    discards = apply_discard_rules(points, load_validity, protocol.discard_rules)
    for d in discards:
        points[d["point"]]["discarded"] = True
    rates = [s["decode_tok_s_per_stream_mean"] for s in points.values() if s.get("decode_tok_s_per_stream_mean")]
    return {
        "points": points,
        "discards": discards,
        "discard_rules": protocol.discard_rules.model_dump(),
        "telemetry": telemetry,
        "peak_engine_rss_gib": round(peak_rss_bytes / 2**30, 3) if peak_rss_bytes else None,
        "error_counts": {"admission_rejected": errors.get("admission_rejected", 0),
                         "timeout": errors.get("timeout", 0), "transport": errors.get("transport", 0),
                         "engine_died": errors.get("engine_died", 0), "http_error": errors.get("http_error", 0),
                         "malformed_stream": errors.get("malformed_stream", 0),
                         # Truncation, by whom: a forced-length reply the engine ended short of the
                         # length asked (server usage), and a reply expected to end by itself that
                         # hit the token bound instead (the budget); a forced length ending at its
                         # bound is by design and never counted.
                         "length_truncated": short + errors.get("length_truncated", 0),
                         "length_truncated_by_engine": short,
                         "length_truncated_by_budget": errors.get("length_truncated", 0),
                         "schema_failure": errors.get("schema_failure", 0) if as_json else
                         "not checked: this workload asks for free text (response_format: text)",
                         # Sentinels (gating canary prompts, protocol.canaries.sentinel_share of the
                         # measured requests) judged after each point.
                         "completed_but_wrong": sum(s.get("sentinels", {}).get("completed_but_wrong", 0)
                                                    for s in points.values()),
                         "sentinels": {"share": protocol.canaries.sentinel_share,
                                       "answered_wrongly": sum(s.get("sentinels", {}).get("answered_wrongly", 0)
                                                               for s in points.values()),
                                       "sent": sum(s.get("sentinels", {}).get("sent", 0) for s in points.values()),
                                       "completed": sum(s.get("sentinels", {}).get("completed", 0)
                                                        for s in points.values())}},
        "length_control": {"requested_output_tokens": protocol.workload.output_tokens.describe(),
                           "controlled": not as_json,
                           "completed_requests": completed, "shorter_than_requested": short,
                           "honoured": short == 0 if not as_json else
                           "not forced: JSON replies end where the object closes"},
        "load_validity": load_validity,
        "load_check_counts": LOAD_CHECK_COUNTS,
        "harness_ceiling": harness_ceiling or {"unknown": "no harness ceiling was measured for this run"},
        "decode_tok_s_per_stream_median": statistics.median(rates) if rates else None,
    }
