"""A trace replayed closed loop by session, against the paced calibration server (an instrument
with a known reply time, not an engine): a step never leaves before the reply it acts on, the
sessions run side by side, and the think time is kept."""
import pytest
from stackbook.harness.pacing import Pacing
from stackbook.loadgen.client_processes import run_plan
from stackbook.loadgen.drivers import Target
from stackbook.loadgen.plans import SessionPlan
from stackbook.loadgen.session_loop import next_deadline, session_chains
from stackbook.loadgen.workload import ApproximateTokenizer, PromptSpec
from stackbook.measure.session_order import session_order

TOK = ApproximateTokenizer()
REPLY_S = 0.03 + 7 * 0.02  # the paced server's first token, then 7 gaps, for 8 tokens


@pytest.fixture(scope="module")
def server(start_module_calibration_server):
    return start_module_calibration_server(pacing=Pacing(ttft_ms=30, gap_ms=20))


def prompts(n):
    return [PromptSpec(i, [{"role": "user", "content": f"step {i}"}], 2, output_tokens=8) for i in range(n)]


def test_sessions_are_chained_in_their_order_and_rows_without_one_stand_alone():
    plan = SessionPlan([0.0, 0.1, 0.2, 0.3, 0.4], 0, ("b", "a", "b", "", "a"))
    assert session_chains(plan, 5) == [[0, 2], [1, 4], [3]]


def test_a_later_step_waits_for_the_reply_then_the_think_time_or_its_recorded_time():
    recorded = SessionPlan([0.0, 1.0], 0, ("a", "a"))
    assert next_deadline(recorded, 1, reply_end=0.4) == 1.0   # the reply came early: the log's time
    assert next_deadline(recorded, 1, reply_end=1.7) == 1.7   # the reply came late: at once
    thinking = SessionPlan([0.0, 1.0], 0, ("a", "a"), think_s=0.25)
    assert next_deadline(thinking, 1, reply_end=1.7) == pytest.approx(1.95)


@pytest.mark.parametrize("think_s", [None, 0.1])
def test_each_step_leaves_after_the_reply_before_it(server, think_s):
    # Two sessions of three steps logged 10 ms apart: far sooner than the server can answer.
    plan = SessionPlan([0.0, 0.005, 0.01, 0.015, 0.02, 0.025], 0, ("a", "b", "a", "b", "a", "b"), think_s)
    t = Target(server.base_url, "calibration", {"temperature": 0}, {"max_tokens": 8})
    recs = run_plan(plan, t, prompts(6), TOK, warmup=0, writer=None,
                    base={"run_id": "t", "arm": "cal", "point": "p", "concurrency": 0})
    assert sorted(r.request_index for r in recs) == list(range(6)) and all(r.ok for r in recs)
    by = {r.request_index: r for r in recs}
    order = session_order(recs, [("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2), ("b", 2)])
    assert order == {"sessions": 2, "steps": 6, "out_of_order": 0, "before_previous_reply": 0,
                     "before_previous_reply_ms_max": 0.0}
    for prev, cur in [(0, 2), (2, 4), (1, 3), (3, 5)]:
        gap = by[cur].sent_s - by[prev].end_s
        assert gap >= (think_s or 0) - 0.002      # the think time after the reply, never less
        assert by[cur].scheduled_s >= by[prev].end_s - 0.002  # the deadline it was given is after the reply
    # The two sessions overlap: b's first step went while a's was being answered.
    assert by[1].sent_s < by[0].end_s
    assert by[4].end_s - by[0].sent_s >= 3 * REPLY_S + 2 * (think_s or 0) - 0.01


def test_a_subagent_starts_after_its_parent_s_reply_and_the_parent_waits_for_it(server):
    """Parent p: steps 0, 1, 2; subagent p/a (2 steps) started by p's step 0, waited for by step 1;
    subagent p/b (1 step) started by step 1 in the background. Every recorded time is 0 and each
    recorded tool time 50 ms: the order comes from the replies alone."""
    sessions = ("p", "p/a", "p/a", "p", "p/b", "p")
    spawned = (None, ("p", 0), None, None, ("p", 1), None)
    waits = ((), (), (), ("p/a",), (), ())
    plan = SessionPlan([0.0] * 6, 0, sessions, gaps=(None, 0.05, 0.05, 0.05, 0.05, 0.05), spawned_by=spawned,
                       waits_for=waits)
    t = Target(server.base_url, "calibration", {"temperature": 0}, {"max_tokens": 8})
    recs = run_plan(plan, t, prompts(6), TOK, warmup=0, writer=None,
                    base={"run_id": "t", "arm": "cal", "point": "p", "concurrency": 0})
    by = {r.request_index: r for r in recs}
    assert sorted(by) == list(range(6)) and all(r.ok for r in recs)
    assert by[1].sent_s >= by[0].end_s + 0.05 - 0.002  # the subagent after the reply that spawns it, its tool time kept
    assert by[3].sent_s >= by[2].end_s + 0.05 - 0.002      # the parent's step after the subagent's last reply
    assert by[4].sent_s >= by[3].end_s + 0.05 - 0.002
    assert by[5].sent_s < by[4].end_s                       # the background subagent is not waited for
    steps = [("p", 0), ("p/a", 0), ("p/a", 1), ("p", 1), ("p/b", 0), ("p", 2)]
    order = session_order(recs, steps, list(zip(spawned, waits)))
    assert order["subagents"] == 2 and order["before_spawning_reply"] == 0 and order["before_subagent_end"] == 0
    assert order["out_of_order"] == 0 and order["before_previous_reply"] == 0


def test_subagent_order_violations_are_counted_from_the_records():
    from types import SimpleNamespace
    from stackbook.loadgen.phases import Phase

    def rec(i, sent, end):
        return SimpleNamespace(request_index=i, sent_s=sent, end_s=end, phase=Phase.MEASURE)
    steps = [("p", 0), ("p/a", 0), ("p", 1)]
    links = [(None, ()), (("p", 0), ()), (None, ("p/a",))]
    # the subagent left 0.1 s before its parent's reply ended; the parent's next step before the subagent's reply
    recs = [rec(0, 0.0, 1.0), rec(1, 0.9, 2.0), rec(2, 1.5, 2.5)]
    order = session_order(recs, steps, links)
    assert (order["before_spawning_reply"], order["before_subagent_end"]) == (1, 1)


def test_the_agentx_example_replays_with_its_subagents_in_order(server):
    """The committed AgentX example as a campaign plans it (scaled 0.5, 20 times as fast), sent to
    the paced server: every step answered, no order violated, within sessions or across subagents."""
    from stackbook.config.protocol import Protocol
    from stackbook.locations import REPO_ROOT

    p = Protocol.model_validate({
        "arrival": {"kind": "trace", "path": str(REPO_ROOT / "campaigns/traces/example-agentx.jsonl"), "format": "weka",
                    "length_scale": 0.5, "order": "session", "speedup": 20},
        "workload": {"kind": "synthetic", "prompt_tokens": 64, "output_tokens": 8}, "context_length": 2048})
    a = p.arrival
    plan = a.point_plan(a.load_levels()[0], 20, 0, 0)
    t = Target(server.base_url, "calibration", {"temperature": 0}, {"max_tokens": 8})
    recs = run_plan(plan, t, prompts(20), TOK, warmup=0, writer=None,
                    base={"run_id": "t", "arm": "cal", "point": "p", "concurrency": 0})
    assert len(recs) == 20 and all(r.ok for r in recs)
    order = session_order(recs, a.session_steps(), a.session_links())
    assert order == {"sessions": 6, "steps": 20, "out_of_order": 0, "before_previous_reply": 0,
                     "before_previous_reply_ms_max": 0.0, "subagents": 4, "before_spawning_reply": 0,
                     "before_subagent_end": 0}
