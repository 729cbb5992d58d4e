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
