"""A replay's realized input lengths against the trace's, by a two-sample KS test: the engine's
own counts where it reports them, the measured and answered requests only."""
import pytest
from stackbook.config.protocol import Protocol
from stackbook.loadgen.plans import SessionPlan, TracePlan
from stackbook.loadgen.records import RequestRecord
from stackbook.loadgen.workload import ApproximateTokenizer
from stackbook.locations import REPO_ROOT
from stackbook.measure import point_meter
from stackbook.measure.input_lengths import input_length_match, trace_input_lengths

OPENAI = str(REPO_ROOT / "campaigns" / "traces" / "example-openai.jsonl")
TOK = ApproximateTokenizer()
MOONCAKE = str(REPO_ROOT / "campaigns" / "traces" / "example-mooncake.jsonl")


def rec(i, server, client=None, phase="measure", error="none"):
    return RequestRecord(run_id="t", arm="a", point="p", concurrency=0, request_index=i, phase=phase,
                         scheduled_s=0.0, sent_s=0.0, end_s=1.0, sent_unix=0.0, output_tokens_requested=8,
                         prompt_tokens_client=client or server, prompt_tokens_server=server, error_class=error)


def test_the_realized_lengths_are_the_engines_on_measured_answered_requests():
    trace = [100, 200, 300, 400, 500, 600]
    same = [rec(i, n) for i, n in enumerate(trace)] + [rec(9, 5000, phase="warmup"), rec(10, 9000, error="timeout")]
    out = input_length_match(trace, same)
    assert out["counted_by"] == "engine" and out["realized_requests"] == 6
    assert out["ks_statistic"] == 0.0 and out["p_value"] == 1.0 and out["matches"]


def test_a_replay_that_lost_its_long_requests_does_not_match():
    trace = list(range(100, 2100, 100))                    # 20 requests, 100..2000 tokens
    short_only = [rec(i, n) for i, n in enumerate(trace[:8])]  # only the 8 shortest answered
    out = input_length_match(trace, short_only)
    assert out["ks_statistic"] == pytest.approx(0.6) and out["p_value"] < 0.05 and not out["matches"]


def test_client_counts_stand_in_only_where_the_engine_reports_none():
    out = input_length_match([10, 20, 30], [rec(0, None, 10), rec(1, 20), rec(2, 30)])
    assert out["counted_by"] == "client"
    assert input_length_match([10], [rec(0, 10)]) is None


def protocol(**arrival):
    return Protocol(arrival={"kind": "trace", **arrival}, context_length=2048,
                    workload={"kind": "synthetic", "prompt_tokens": 128, "output_tokens": 8})


def test_a_logs_lengths_are_its_recorded_prompts_counted_as_sent_and_a_lengths_trace_its_own():
    log = protocol(path=OPENAI, format="openai")
    [level] = log.arrival.load_levels()
    prompts, _ = point_meter.point_requests(log, level, 12, 0, TOK, sentinels=[])
    assert trace_input_lengths(log.arrival, level, TOK) == [p.prompt_tokens_client for p in prompts]
    lengths = protocol(path=MOONCAKE, format="mooncake")
    assert trace_input_lengths(lengths.arrival, level, TOK) == [r["prompt_tokens"] for r in
                                                                     lengths.arrival.requests()]


def test_order_session_replays_each_session_as_a_closed_loop_and_think_time_needs_it():
    timed = protocol(path=OPENAI, format="openai")
    [level] = timed.arrival.load_levels()
    assert type(timed.arrival.point_plan(level, 12, 0, 0)) is TracePlan
    chained = protocol(path=OPENAI, format="openai", order="session", think_s=0.5)
    plan = chained.arrival.point_plan(level, 12, 0, 0)
    assert isinstance(plan, SessionPlan) and plan.think_s == 0.5
    assert plan.schedule == timed.arrival.point_plan(level, 12, 0, 0).schedule
    assert plan.sessions == tuple(s for s, _ in chained.arrival.session_steps())
    assert sorted(set(plan.sessions)) == ["agent-0", "agent-1", "agent-2", "agent-3"]
    with pytest.raises(ValueError, match="think_s paces a session's steps: set order: session"):
        protocol(path=OPENAI, format="openai", think_s=0.5)
