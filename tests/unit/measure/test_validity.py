"""The load-validity thresholds: one lag limit and one rate tolerance for every judge."""
from types import SimpleNamespace

from stackbook.harness import fidelity
from stackbook.measure.validity import (
    MAX_SCHEDULE_LAG_MS,
    RATE_TOLERANCE,
    apply_discard_rules,
    point_validity,
    rate_held,
)


def test_rate_held_needs_timely_sends_and_the_schedules_rate():
    assert (MAX_SCHEDULE_LAG_MS, RATE_TOLERANCE) == (5.0, 0.05)
    assert rate_held(4.9, 100.0, 104.9)
    assert not rate_held(5.1, 100.0, 100.0)       # late sends
    assert not rate_held(1.0, 100.0, 94.0)        # 6% short of the schedule
    assert not rate_held(None, 100.0, 100.0)      # no lag measured: nothing shows the rate was held
    assert fidelity.highest_rate_held([{"rate_rps": 10, "lag": 5.0, "e": 0}, {"rate_rps": 20, "lag": 5.01, "e": 0}],
                                      "lag", "e") == 10


def test_point_validity_closed_and_open_loop():
    assert point_validity({"concurrency": 8, "in_flight_mean": 7.3})["valid"]
    assert not point_validity({"concurrency": 8, "in_flight_mean": 7.1})["valid"]   # > 10% below
    v = point_validity({"rate": 2.0, "schedule_lag_ms_p99": 0.4, "scheduled_rate_rps": 2.1, "achieved_rate_rps": 1.9})
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
        {"point": "c2", "rule": "on_invalid_load", "detail": "configured_concurrency=2, in_flight_mean=1.5"}]
