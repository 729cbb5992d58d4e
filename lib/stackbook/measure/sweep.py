"""The load sweep for one arm: every load level, repetitions, raw records, summaries."""
from __future__ import annotations

import statistics
import time

from tqdm import tqdm

from stackbook.config.arrival_patterns import ArrivalPattern
from stackbook.gate.canaries import load_suite
from stackbook.gate.sentinels import judge_sentinels, mix_sentinels, sentinel_checks
from stackbook.loadgen.client_processes import ClientCost, merge_parts, send_point
from stackbook.loadgen.phases import Phase
from stackbook.loadgen.plans import ClosedPlan, PointPlan
from stackbook.loadgen.prompt_salt import salt_point
from stackbook.loadgen.records import NOT_ANSWERED, RecordWriter, read_records
from stackbook.loadgen.sent import SentWriter, point_digests, read_sent
from stackbook.loadgen.workload import (
    ApproximateTokenizer,
    client_tokenizer,
    recorded_prompts,
    synthetic_prompts,
)
from stackbook.measure.input_lengths import input_length_match, trace_input_lengths
from stackbook.measure.metrics import client_gaps, point_summary
from stackbook.measure.reconciliation import reconcile_with_engine
from stackbook.measure.session_order import session_order
from stackbook.measure.prefix_cache import cache_counters, prepare_point
from stackbook.measure.runtime import read_processes, runtime_evidence
from stackbook.measure.telemetry import (
    GaugeSampler,
    GpuSampler,
    RssSampler,
    metrics_delta,
    scrape_metrics,
)
from stackbook.measure.validity import apply_discard_rules, client_cpu_warning, point_validity
from stackbook.measure.validity import with_client_delay  # the client-delay rule
from stackbook.model.artifacts import artifacts_for


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


def tokenizer_for(session):
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


def cooldown_requests(protocol, level: dict) -> int:
    return protocol.arrival.cooldown_requests(level, protocol)


def turns_of(protocol) -> int:
    return protocol.workload.turns()


def requests_at(protocol, level: dict) -> int:
    """Prompts (conversations, in a multi-turn workload) sent at this load level."""
    return protocol.arrival.prompts_at(level, protocol)


def point_name(level: dict, repetition: int) -> str:
    return ArrivalPattern.point_name(level, repetition)


def sentinels_for(protocol) -> list:
    """The gating canary checks mixed into every point as sentinels (none without a suite)."""
    try:
        suite, _ = load_suite(protocol.canaries.suite)
    except FileNotFoundError:
        return []
    return sentinel_checks(suite, protocol.canaries.out_of_scope)


def schedule_for(protocol, level: dict, n: int, seed: int) -> list[float]:
    return protocol.arrival.schedule(level, n, seed)


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


def earlier_points(session) -> tuple[dict, dict]:
    """The points and telemetry an earlier call of this arm's sweep recorded (results.json)."""
    from stackbook.evidence.files import read_json

    sweep = (read_json(session.arm_dir.results, {}) or {}).get("sweep") or {}
    return sweep.get("points") or {}, sweep.get("telemetry") or {}


def run_sweep(session, run_id: str, progress: bool = True, repetitions: list[int] | None = None,
              began: str | None = None) -> dict:
    """Run the points of the given repetitions (None: the protocol's `min` repetitions);
    records go to requests.jsonl as they complete. Points already complete in requests.jsonl (an
    earlier repetition, a resumed run) are not run again, and their server-side evidence is carried
    over from results.json. The summary covers every repetition measured so far. `began` says how
    this call's repetitions began (a fresh engine start, or the engine left running)."""
    protocol = session.protocol
    target = session.target()
    target.length_for = session.adapter.output_length_fields
    series = session.adapter.metric_series  # every engine series this arm's points read: its own kind's
    tokenizer = tokenizer_for(session)
    records_path = session.arm_dir.requests
    levels = load_levels(protocol)
    reps = list(range(protocol.repetitions.min)) if repetitions is None else sorted(repetitions)
    expected = {point_name(lv, rep): requests_at(protocol, lv) for rep in reps for lv in levels}
    turns = turns_of(protocol)
    if session.arm_dir.client_parts.is_dir():  # an interrupted point's parts, kept as a cut attempt
        with RecordWriter(records_path) as writer, SentWriter(session.arm_dir.requests_sent) as sent_writer:
            merge_parts(session.arm_dir.client_parts, writer, sent_writer)
    attempts = latest_attempts(read_records(records_path))
    total = len(reps) * protocol.requests_per_repetition()
    earlier, earlier_telemetry = earlier_points(session)
    pid = session.engine.get("pid") or (session.adapter.proc.pid if session.adapter.proc else None)
    alive = session.engine_alive
    telemetry: dict[str, dict] = {}
    server_side: dict[str, dict] = {}  # per point run here: cache state, engine gauges, reconciliation
    client_cost: dict[str, ClientCost] = {}
    client_warnings: list[str] = []
    bar = tqdm(total=total, desc=f"{session.arm.name} requests", disable=not progress)
    gauges = GaugeSampler(target.base_url, session.adapter.metrics_path)
    sentinels = sentinels_for(protocol)
    with RssSampler(pid, keep=session.arm_dir.engine_samples) as rss, GpuSampler() as gpu, gauges, RecordWriter(records_path) as writer, \
            SentWriter(session.arm_dir.requests_sent) as sent_writer:
        target.on_send = sent_writer.write
        for rep in reps:
            seed = protocol.seed_of(rep)
            for lv in levels:
                name = point_name(lv, rep)
                n = expected[name]
                attempt, done = attempts.get(name, (-1, 0))
                if done >= n * turns:
                    bar.update(n * turns)
                    continue
                # A point cut short is run again from its start as a new attempt; the records of
                # the cut attempt stay on disk but never enter the metrics.
                check_engine(session, name)
                base = {"run_id": run_id, "arm": session.arm.name, "point": name, "repetition": rep,
                        "concurrency": lv.get("concurrency", 0), "attempt": attempt + 1}
                prompts, plan = point_requests(protocol, lv, n, seed, tokenizer, sentinels)
                cache = prepare_point(protocol.prefix_cache, session.adapter, target, protocol.workload, tokenizer)
                prompts, salt = salt_point(protocol, run_id, session.arm.name, name, attempt + 1, prompts, tokenizer)
                if salt:
                    cache["salt"] = salt
                before = scrape_metrics(target.base_url, session.adapter.metrics_path, target.headers)
                roles = session.adapter.process_roles  # CPU, faults, switches: read at the point's start and end
                procs0 = read_processes(pid, roles)
                wall0, unix0 = time.perf_counter(), time.time()
                recs, cost = send_point(plan, target, prompts, tokenizer, processes=protocol.loadgen.processes,
                                        parts_dir=session.arm_dir.client_parts, writer=writer,
                                        sent_writer=sent_writer, base=base, warmup=protocol.warmup_requests,
                                        progress=bar, alive=alive, engine_pid=pid)
                procs1, wall1 = read_processes(pid, roles), time.perf_counter()
                procs1["client"]["cpu_s"] += cost.elsewhere_s()
                client_cost[name] = cost
                warning = client_cpu_warning(name, cost.busiest_fraction(), protocol.loadgen.processes)
                if warning:
                    client_warnings.append(warning)
                    bar.write(warning)
                check_engine(session, name, recs)
                after = scrape_metrics(target.base_url, session.adapter.metrics_path, target.headers)
                telemetry[name] = metrics_delta(before, after)
                during = gauges.window(unix0, time.time())
                server_side[name] = {
                    "repetition_began": began or "not recorded",
                    "prefix_cache": cache | cache_counters(telemetry[name], recs, series),
                    "engine_gauges_during": during,
                    "gpu_during": gpu.window(unix0, time.time()),
                    "engine_reconciliation": reconcile_with_engine(telemetry[name], recs, series),
                    **runtime_evidence(procs0, procs1, wall1 - wall0, telemetry[name], recs, during, series)}
        peak = rss.peak_bytes
        gpu_summary = gpu.summary()
    bar.close()
    records = read_records(records_path, latest_attempt=True)
    sent = point_digests(read_sent(session.arm_dir.requests_sent, latest_attempt=True))
    points: dict[str, dict] = {}
    measured_reps = sorted({r.repetition for r in records} | set(reps))
    for name in earlier:
        if name not in server_side and name in earlier_telemetry:
            telemetry[name] = earlier_telemetry[name]
    implied = protocol.arrival.implied_reuse()
    # each level's trace lengths, counted once for all its repetitions (a long log is tokenized once)
    trace_lengths = {lv["level"]: trace_input_lengths(protocol.arrival, lv, tokenizer) for lv in levels}
    for rep in measured_reps:
        for lv in levels:
            name = point_name(lv, rep)
            if not any(r.point == name for r in records):
                continue
            s = point_summary([r for r in records if r.point == name], protocol.slo)
            if name not in server_side:  # measured by an earlier call: its server-side readings stay
                s = {k: v for k, v in (earlier.get(name) or {}).items() if k != "discarded"} | s
            s.update({k: v for k, v in lv.items() if k in ("concurrency", "rate", "speedup")}, repetition=rep,
                     level=lv["level"])
            # the level the arms are compared at: clients, a rate, or a trace's replay speed
            s["load"] = lv.get("concurrency") or lv.get("rate") or lv.get("speedup") or s.get("achieved_rate_rps")
            if issubclass(protocol.arrival.plan_type, ClosedPlan):
                s.update(client_gaps([r for r in records if r.point == name]))
            s["sentinels"] = judge_sentinels([r for r in records if r.point == name], sentinels)
            if name in client_cost:
                s.update(client_cost[name].summary())
            s.update(server_side.get(name, {}))
            if implied and isinstance(s.get("prefix_cache"), dict):  # beside the engine's realized hit rate
                s["prefix_cache"] = s["prefix_cache"] | {"implied_hit_rate": implied["hit_rate"]}
            s.update(sent.get(name, {}))
            s["output_tokens_server_mean"] = realized_output_tokens([r for r in records if r.point == name])
            if (lengths := trace_lengths[lv["level"]]) is not None:
                s["input_lengths"] = input_length_match(lengths, [r for r in records if r.point == name])
            if steps := protocol.arrival.session_steps():  # a replayed log's sessions, checked from the records
                s["session_order"] = session_order([r for r in records if r.point == name], steps)
            points[name] = s
    out = summarize_sweep(points, telemetry, peak, protocol, harness_ceiling=session.harness_ceiling())
    method = session.adapter.length_control
    out["length_control"]["method"] = method or "none: this engine offers no way to force an exact length"
    if method is None:
        out["length_control"].update(controlled=False, honoured="not controlled: replies may end early")
    out["gpu_telemetry"] = gpu_summary
    out["client_warnings"] = client_warnings
    # Start-up and recovery are lifecycle costs, kept apart from the steady-state points.
    out["engine_lifecycle"] = {"ready_after_s": (session.engine or {}).get("ready_after_s"),
                               "restarts": (session.engine or {}).get("restarts")}
    out["prefix_cache"] = {"state": protocol.prefix_cache, "policy": session.adapter.prefix_cache_policy,
                           "points": {name: x["prefix_cache"] for name, x in points.items() if x.get("prefix_cache")}}
    return out


def realized_output_tokens(records) -> float | None:
    """Mean output length of the measured, completed replies by the server's own usage counts
    (None where the server reports none): what the engine really generated, for fairness."""
    counts = [r.output_tokens_server for r in records
              if r.phase == Phase.MEASURE and r.ok and r.output_tokens_server is not None]
    return sum(counts) / len(counts) if counts else None


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
    load_validity = {name: point_validity(s, harness_ceiling, plan=protocol.arrival.plan_type)
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
        "harness_ceiling": harness_ceiling or {"unknown": "no harness ceiling was measured for this run"},
        "decode_tok_s_per_stream_median": statistics.median(rates) if rates else None,
    }
