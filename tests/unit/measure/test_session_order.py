"""A replayed log's sessions, checked from the records: steps sent in their order, and each after
the step before it was answered."""
from stackbook.locations import REPO_ROOT
from stackbook.config.protocol import Protocol
from stackbook.measure.session_order import session_order

from tests.support.records import request_record


def rec(i, sent, end, phase="measure"):
    return request_record(request_index=i, sent_s=sent, end_s=end, first_token_s=sent + 0.1, phase=phase)


STEPS = [("a", 0), ("b", 0), ("a", 1), ("a", 2), (None, 0)]


def test_steps_in_order_each_after_its_previous_reply_count_no_violation():
    records = [rec(0, 0.0, 1.0), rec(1, 0.5, 2.0), rec(2, 1.5, 2.5), rec(3, 3.0, 4.0), rec(4, 3.1, 3.5)]
    assert session_order(records, STEPS) == {"sessions": 2, "steps": 4, "out_of_order": 0,
                                             "before_previous_reply": 0, "before_previous_reply_ms_max": 0.0}


def test_a_step_sent_before_its_previous_reply_ended_or_before_its_previous_step_is_counted():
    # a's step 1 is sent 0.4 s before step 0's reply ends; step 2 is sent before step 1 was sent.
    records = [rec(0, 0.0, 1.0), rec(1, 0.5, 2.0), rec(2, 0.6, 2.5), rec(3, 0.55, 4.0)]
    out = session_order(records, STEPS)
    assert (out["out_of_order"], out["before_previous_reply"]) == (1, 2)
    assert out["before_previous_reply_ms_max"] == 1950.0  # step 2 sent at 0.55 s, step 1 answered at 2.5 s
    # Warm-up and cool-down requests are not the log's steps; a trace without sessions has no check.
    assert session_order([rec(0, 0.0, 1.0, phase="warmup")], STEPS)["steps"] == 0
    assert session_order(records, [(None, 0)] * 5) is None


def test_the_logged_agent_example_names_each_steps_session():
    p = Protocol(arrival={"kind": "trace", "path": str(REPO_ROOT / "campaigns/traces/example-openai.jsonl"),
                          "format": "openai"}, context_length=2048)
    steps = p.arrival.session_steps()
    assert (len(steps) == 12 and steps[0] == ("agent-0", 0)
            and sorted(t for s, t in steps if s == "agent-3") == [0, 1, 2])
    plain = Protocol(arrival={"kind": "trace", "path": str(REPO_ROOT / "campaigns/traces/example-azure.csv"),
                              "format": "azure"})
    assert plain.arrival.session_steps() is None
