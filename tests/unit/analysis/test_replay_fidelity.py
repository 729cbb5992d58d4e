"""A replayed trace's sessions and input lengths, per arm and point, with the finding in words."""
from stackbook.analysis.replay_fidelity import replay_table

ORDER = {"sessions": 4, "steps": 12, "out_of_order": 0, "before_previous_reply": 0, "before_previous_reply_ms_max": 0.0}
LENGTHS = {"trace_requests": 12, "realized_requests": 12, "counted_by": "engine", "trace_median": 180,
           "realized_median": 201, "ks_statistic": 0.25, "p_value": 0.8, "matches": True}


def arm(**point):
    return {"results": {"sweep": {"points": {"trace-r0": point}}}}


def test_a_kept_replay_and_a_late_one_in_words():
    late = dict(ORDER, before_previous_reply=3, before_previous_reply_ms_max=412.4)
    t = replay_table({"llama-cpp": arm(session_order=ORDER, input_lengths=LENGTHS),
                      "vllm-cpu": arm(session_order=late, input_lengths=dict(LENGTHS, p_value=0.01, matches=False))})
    assert t.loc[("llama-cpp", "trace-r0"), "finding"] == (
        "every session in order, each step after its reply (12 steps); input lengths match the trace's "
        "(KS p = 0.80, 12 of 12 requests, counted by the engine)")
    assert t.loc[("vllm-cpu", "trace-r0"), "finding"].startswith(
        "order kept, but 3 steps left before the reply they follow (up to 412 ms early")
    assert "input lengths differ from the trace's (KS p = 0.01" in t.loc[("vllm-cpu", "trace-r0"), "finding"]
    assert t.loc[("vllm-cpu", "trace-r0"), "before the reply"] == 3


def test_nothing_where_no_trace_was_replayed():
    assert replay_table({"a": arm(p50_ttft_ms=3.0)}) is None


def test_a_trace_replays_loads_are_named_by_their_replay_speed_not_as_concurrency():
    """A trace point's load is its replay speed (the same for every arm), so the arms meet at it;
    its achieved rate follows each engine under a session replay and would part them."""
    import pandas as pd
    from stackbook.loadgen.load_point import load_unit
    from stackbook.analysis.figure_style import load_axis

    assert load_unit([None, None], [1.0, 1.0]) == "trace speed"
    assert load_unit([2.0], [None]) == "offered rate" and load_unit([None], []) == "concurrency"
    assert load_axis(pd.DataFrame({"load": [1.0], "rate": [None], "speedup": [1.0]})).startswith("trace replay speed")


def test_subagent_order_is_said_in_words():
    from stackbook.analysis.replay_fidelity import finding

    base = {"sessions": 3, "steps": 6, "out_of_order": 0, "before_previous_reply": 0, "before_previous_reply_ms_max": 0}
    kept = finding(None, base | {"subagents": 2, "before_spawning_reply": 0, "before_subagent_end": 0})
    assert kept.endswith("2 subagents each started after the reply that spawns it, every step after the subagents "
                         "it waits for")
    broken = finding(None, base | {"subagents": 2, "before_spawning_reply": 1, "before_subagent_end": 3})
    assert "1 subagents started before the reply that spawns them, 3 steps sent before the subagents" in broken
