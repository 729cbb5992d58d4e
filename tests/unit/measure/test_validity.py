"""The load-validity thresholds: one lag limit and one rate tolerance for every judge."""
import pytest
from pathlib import Path
from types import SimpleNamespace

from stackbook.harness import fidelity
from stackbook.locations import REPO_ROOT
from stackbook.loadgen.plans import ClosedPlan, OpenPlan, SessionPlan
from stackbook.measure.validity import (
    MAX_SCHEDULE_LAG_MS,
    RATE_TOLERANCE,
    CLIENT_CPU_NEAR_CORE,
    apply_discard_rules,
    client_cpu_warning,
    measured_requests_for,
    point_validity,
    rate_held,
)

from tests.support.records import request_record, sentinel_record


def test_rate_held_needs_timely_sends_and_the_schedules_rate():
    assert (MAX_SCHEDULE_LAG_MS, RATE_TOLERANCE) == (5.0, 0.05)
    assert rate_held(4.9, 100.0, 104.9)
    assert not rate_held(5.1, 100.0, 100.0)       # late sends
    assert not rate_held(1.0, 100.0, 94.0)        # 6% short of the schedule
    assert not rate_held(None, 100.0, 100.0)      # no lag measured: nothing shows the rate was held
    assert fidelity.highest_rate_held([{"rate_rps": 10, "lag": 5.0, "e": 0}, {"rate_rps": 20, "lag": 5.01, "e": 0}],
                                      "lag", "e") == 10


def test_point_validity_closed_and_open_loop():
    assert point_validity({"concurrency": 8, "in_flight_mean": 7.3}, plan=ClosedPlan)["valid"]
    assert not point_validity({"concurrency": 8, "in_flight_mean": 7.1}, plan=ClosedPlan)["valid"]   # > 10% below
    v = point_validity({"rate": 2.0, "schedule_lag_ms_p99": 0.4, "scheduled_rate_rps": 2.1, "achieved_rate_rps": 1.9},
                       plan=OpenPlan)
    assert v["valid"] is False and v["configured_rate_rps"] == 2.0


def test_discard_rules_name_the_rule_and_the_figure():
    rules = SimpleNamespace(max_failed_fraction=0.1, on_engine_restart=True, on_invalid_load=True)
    points = {"c1": {"requests": 10, "completed": 8, "errors": {"engine_died": 2}, "concurrency": 1},
              "c2": {"requests": 10, "completed": 10, "errors": {}, "concurrency": 2}}
    validity = {"c1": {"valid": True}, "c2": {"configured_concurrency": 2, "in_flight_mean": 1.5, "valid": False}}
    out = apply_discard_rules(points, validity, rules)
    assert out == [
        {"point": "c1", "rule": "max_failed_fraction", "detail": "2/10 requests failed (> 10%)"},
        {"point": "c1", "rule": "on_engine_restart", "detail": "the engine died during the point (2 requests cut)"},
        {"point": "c2", "rule": "on_invalid_load",
         "detail": "1.50 requests in flight against 2 configured (kept: 1.80 to 2.20)"}]


def _closed_loop(service_s: float, gap_s: float, n: int = 12):
    """One client (concurrency 1): each request is sent `gap_s` after the previous reply ended."""
    out, t = [], 0.0
    for i in range(n):
        out.append(request_record(phase="warmup" if i == 0 else "measure", request_index=i, scheduled_s=t, sent_s=t,
                                  first_token_s=t + service_s / 2, end_s=t + service_s, chunk_times_s=[t + service_s],
                                  chunk_tokens=[1], prompt_tokens_client=4, prompt_tokens_server=4,
                                  output_tokens_server=1, output_tokens_client=1, output_tokens_requested=1,
                                  finish_reason="length"))
        t += service_s + gap_s
    return out


def test_a_concurrency_one_point_against_a_sub_millisecond_server_is_held():
    """Service 0.5 ms, the client's own gap 0.4 ms: 0.56 requests in flight, which the in-flight
    rule alone would discard; the client's gap is counted apart and the point stands."""
    from stackbook.config.protocol import Slo
    from stackbook.measure.metrics import client_gaps, point_summary
    records = _closed_loop(0.0005, 0.0004)
    s = point_summary(records, Slo()) | client_gaps(records) | {"concurrency": 1}
    # window: first measured send (0.9 ms) to last end (10.4 ms); 11 services of 0.5 ms, 10 gaps of 0.4 ms
    assert s["in_flight_mean"] == pytest.approx(5.5 / 9.5, rel=1e-6)
    assert s["client_gap_in_flight"] == pytest.approx(4.0 / 9.5, rel=1e-6)
    assert s["client_gap_ms_p99"] == pytest.approx(0.4)
    assert not point_validity({"concurrency": 1, "in_flight_mean": s["in_flight_mean"]},
                              plan=ClosedPlan)["valid"]  # before
    v = point_validity(s, plan=ClosedPlan)
    assert v["valid"] and v["client_gap_in_flight"] == pytest.approx(0.421, abs=1e-3)


def test_a_slow_client_still_invalidates_a_closed_loop_point():
    """A client that takes 20 ms to send its next request (above the 5 ms limit) did not hold the load."""
    from stackbook.config.protocol import Slo
    from stackbook.measure.metrics import client_gaps, point_summary
    records = _closed_loop(0.010, 0.020)
    s = point_summary(records, Slo()) | client_gaps(records) | {"concurrency": 1}
    assert s["client_gap_ms_p99"] == pytest.approx(20.0)
    assert not point_validity(s, plan=ClosedPlan)["valid"]


def test_a_few_long_client_gaps_beside_long_replies_leave_the_load_intact():
    """Replies of 5 s and a client gap of 6.5 ms (p99 above the 5 ms limit, but 0.1% of the slots,
    as a busy 2-core host gives): the client kept its request in flight; the point stands."""
    from stackbook.config.protocol import Slo
    from stackbook.measure.metrics import client_gaps, point_summary
    records = _closed_loop(5.0, 0.0065)
    s = point_summary(records, Slo()) | client_gaps(records) | {"concurrency": 1}
    assert s["client_gap_ms_p99"] == pytest.approx(6.5)
    assert s["client_gap_in_flight"] < 0.002
    assert point_validity(s, plan=ClosedPlan)["valid"]


def _sessions(late_s: float, service_s: float = 4.0, steps: int = 10):
    """Two sessions replayed closed loop, each step 1 s of tool time after its reply, both starting
    at 0: the second session's first send is `late_s` behind its deadline (the first one's send
    held the loop), every other send on time."""
    out = []
    lengths = dict(prompt_tokens_client=4, prompt_tokens_server=4, output_tokens_server=1, output_tokens_client=1,
                   output_tokens_requested=1, finish_reason="length", concurrency=0)
    for session in (0, 1):
        t = 0.0
        for k in range(steps):
            sent = t + (late_s if session and not k else 0.0)
            end = sent + service_s
            out.append(request_record(request_index=2 * k + session, scheduled_s=t, sent_s=sent,
                                      first_token_s=sent + 0.5, end_s=end, chunk_times_s=[end], chunk_tokens=[1],
                                      **lengths))
            t = end + 1.0
    return out


def test_a_session_replay_judges_a_late_send_by_the_share_of_sessions_it_held_back():
    """A send 100 ms late (p99 far past 5 ms) among 20 steps seconds apart held back 0.1% of the
    two sessions in flight: the replay stands. An open loop with the same lateness does not, and a
    replay whose client held a tenth of its sessions back does not either."""
    from stackbook.config.protocol import Slo
    from stackbook.measure.metrics import point_summary
    from stackbook.measure.validity import describe_validity
    s = point_summary(_sessions(0.1), Slo()) | {"concurrency": 0}
    assert s["schedule_lag_ms_p99"] > 5 and 0 < s["schedule_lag_in_flight"] < 0.01
    assert point_validity(s, plan=SessionPlan)["valid"]
    assert not point_validity(s, plan=OpenPlan)["valid"]
    slow = point_summary(_sessions(9.0), Slo()) | {"concurrency": 0}
    v = point_validity(slow, plan=SessionPlan)
    assert slow["schedule_lag_in_flight"] / slow["in_flight_mean"] > 0.1 and not v["valid"]
    share = slow["schedule_lag_in_flight"] / slow["in_flight_mean"]
    assert describe_validity(v) == (f"sends were late by {slow['schedule_lag_ms_p99']:.1f} ms at p99 (limit 5 ms), "
                                    f"holding back {share:.0%} of the sessions in flight (limit 10%)")


def test_a_client_near_one_core_is_named_with_the_setting_that_spreads_it():
    assert client_cpu_warning("rate800-r0", CLIENT_CPU_NEAR_CORE - 0.01, 1) is None
    assert client_cpu_warning("rate800-r0", None, 1) is None
    msg = client_cpu_warning("rate800-r0", 0.93, 2)
    assert msg.startswith("point rate800-r0: the busiest client process used 93% of a CPU core")
    assert "protocol.loadgen.processes: 4 in the campaign (now 2)" in msg


# Real records: the committed quickstart reference, llama-cpp arm, points c1 and c4 (8 measured
# requests, 1 sentinel; warm-up 2), copied so the test does not move when the runs are redone.
QUICKSTART = Path(__file__).parents[1] / "data" / "quickstart-reference-llama-cpp-c1-c4.jsonl"


def _real_point(name: str) -> dict:
    from stackbook.config.protocol import Slo
    from stackbook.loadgen.records import read_records
    from stackbook.measure.metrics import client_gaps, point_summary
    records = [r for r in read_records(QUICKSTART) if r.point == name]
    return point_summary(records, Slo()) | client_gaps(records) | {"concurrency": records[0].concurrency}


def test_a_closed_loop_point_whose_measured_requests_did_not_hold_its_concurrency_is_invalid():
    """Quickstart llama-cpp c=4: the engine held 4.00 requests (warm-up and cool-down at the
    window's edges), but the measured ones were 2.73 in flight and Little's law over them says the
    same: 32% short of 4, so the point is invalid, and the rule says how many requests would do."""
    s = _real_point("c4-r0")
    assert s["engine_in_flight_mean"] == pytest.approx(3.999, abs=1e-3)
    assert s["in_flight_mean"] == pytest.approx(2.731, abs=1e-3)
    assert s["littles_law_concurrency"] == pytest.approx(2.731, abs=1e-3)  # every one inside the window
    v = point_validity(s, plan=ClosedPlan)
    assert v["valid"] is False
    assert v["too_few_measured_requests"] == ("8 measured requests cannot hold concurrency 4 within 10%; "
                                              "requests_per_point: 27 can")
    assert measured_requests_for(4) == 27 and measured_requests_for(2) == 9 and measured_requests_for(1) == 0


def test_a_closed_loop_point_that_held_its_concurrency_stands():
    """Quickstart llama-cpp c=1: 0.999 in flight, Little's law 0.999."""
    s = _real_point("c1-r0")
    assert s["in_flight_mean"] == pytest.approx(0.999, abs=1e-3)
    assert s["littles_law_concurrency"] == pytest.approx(0.999, abs=2e-3)
    assert point_validity(s, plan=ClosedPlan)["valid"] is True


def test_littles_law_alone_off_by_more_than_the_tolerance_invalidates():
    assert point_validity({"concurrency": 4, "in_flight_mean": 3.9, "littles_law_concurrency": 3.9},
                          plan=ClosedPlan)["valid"]
    assert not point_validity({"concurrency": 4, "in_flight_mean": 3.9, "littles_law_concurrency": 3.5},
                              plan=ClosedPlan)["valid"]


def _rules(**kw):
    from stackbook.config.protocol import DiscardRules
    return DiscardRules(**kw)


def test_a_point_whose_sentinels_answered_wrongly_is_discarded():
    """The reply llama-server gave the capital-of-France sentinel with a wrong RoPE base
    (--rope-freq-base 1000): fluent, completed, wrong. The default rule (0) discards the point."""
    from stackbook.gate.canaries import load_suite
    from stackbook.gate.sentinels import judge_sentinels, sentinel_checks
    suite, _ = load_suite("embedded-smollm2")
    checks = sentinel_checks(suite, {"tool_calls": "t", "multi_turn": "m"})
    judged = judge_sentinels([sentinel_record("capital-of-france", "Cherche, I am here to help."),
                              sentinel_record("two-plus-two", "2 + 2 = 4")], checks)
    points = {"c1-r0": {"requests": 8, "completed": 8, "sentinels": judged}}
    assert apply_discard_rules(points, {}, _rules()) == [
        {"point": "c1-r0", "rule": "max_wrong_fraction", "detail": "1/2 sentinels answered wrongly (> 0%)"}]
    assert apply_discard_rules(points, {}, _rules(max_wrong_fraction=0.5)) == []  # a stated tolerance


def test_a_point_whose_sentinels_answered_rightly_stands():
    points = {"c1-r0": {"requests": 8, "completed": 8,
                        "sentinels": {"sent": 1, "completed": 1, "completed_but_wrong": 0}},
              "c2-r0": {"requests": 8, "completed": 8}}  # no sentinels: nothing to judge
    assert apply_discard_rules(points, {}, _rules()) == []


def test_both_sides_of_the_load_check_count_one_set_of_requests():
    """Committed wrong-rope run, the wrong-RoPE arm at c=1: its sentinels ran to their length
    bound (failed, length_truncated) while holding the one slot. In flight counted them; Little's
    law once left them out and read 0.864 against 0.997, so a load the client held was called
    short. Over one set, with every request inside the window, the two sides are one number."""
    from stackbook.config.protocol import Slo
    from stackbook.loadgen.phases import Phase
    from stackbook.loadgen.records import read_records
    from stackbook.measure.metrics import point_summary

    run = REPO_ROOT / "outputs/wrong-rope/reference/arms/llama-cpp-wrong-rope/requests.jsonl"
    records = [r for r in read_records(run, latest_attempt=True) if r.point == "c1-r0"]
    failed = [r for r in records if r.phase == Phase.SENTINEL and not r.ok]
    assert failed, "the point no longer holds failed sentinels: the test would say nothing"
    s = point_summary(records, Slo())
    assert s["littles_law_concurrency"] == pytest.approx(s["in_flight_mean"], abs=1e-6)
    assert point_validity(s | {"concurrency": 1}, plan=ClosedPlan)["valid"] is True
