"""The demand map of replicas behind a router, from hand-made points: the router is an
orchestration centre visited once per attempt (retries counted apart), the replicas one compute
centre of m = N x threads, each replica's demand beside it; and two over one against MVA."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stackbook.analysis.demand_map import demand_map, mva_on_centres, point_centres
from stackbook.analysis.demand_map.orchestration import (
    ROUTER_CENTRE,
    replica_capacity,
    replica_demands,
    router_visits,
    two_over_one,
)

ENGINE = {"kind": "llama_cpp", "launch": {"command": ["llama-server", "--threads", "1"]}}


def routed_point(router_s=0.4, replica_s=(6.0, 2.0), retries=2):
    return {"requests_in_cpu_window": 40, "work_tokens": {"generated_tokens": 320},
            "cpu_seconds": {"client": 0.8, "engine": {"llama_server": sum(replica_s), "router": router_s}},
            "routing": {"router": "sglang", "policy": "cache_aware", "replica_count": 2,
                        "router_counts": {"requests": 40, "retries": retries},
                        "request_shares": [0.75, 0.25],
                        "replicas": [{"replica": 0, "requests": 30, "cpu_s": replica_s[0], "busy_fraction_cpu": 0.9,
                                      "prefix_hit_rate": 0.8},
                                     {"replica": 1, "requests": 10, "cpu_s": replica_s[1], "busy_fraction_cpu": 0.3,
                                      "prefix_hit_rate": 0.6}]}}


def test_the_router_is_its_own_centre_and_the_replicas_one_of_m_equal_n():
    centres = {c.name: c for c in point_centres(routed_point(), ENGINE)}
    router = centres[ROUTER_CENTRE]
    assert router.visits == pytest.approx(1 + 2 / 40)  # each retry a second visit
    assert router.demand_ms == pytest.approx(1000 * 0.4 / 40) and router.capacity == 1.0
    compute = centres["engine compute"]
    assert compute.capacity == 2.0 and "2 replicas" in compute.why_m
    assert compute.demand_ms == pytest.approx(1000 * 8.0 / 40)
    assert not any(name.startswith("engine process") for name in centres)  # the router's seconds are not counted twice
    assert demand_map(list(centres.values()))["bottleneck"] == "engine compute"


def test_one_replica_has_no_router_centre_and_its_own_m():
    point = routed_point()
    point.pop("routing")
    point["cpu_seconds"]["engine"].pop("router")
    centres = {c.name: c for c in point_centres(point, ENGINE)}
    assert ROUTER_CENTRE not in centres and centres["engine compute"].capacity == 1.0
    assert replica_capacity(1.0, "one thread", {}) == (1.0, "one thread")


def test_each_replica_demand_is_its_cpu_over_its_requests():
    rows = replica_demands(routed_point())
    assert [(r["replica"], r["share"], r["demand_ms"]) for r in rows] == [(0, 0.75, 200.0), (1, 0.25, 200.0)]
    assert router_visits(None)[0] == 1.0


def test_twice_the_compute_m_doubles_mva_at_saturation():
    one = [c for c in point_centres({**routed_point(), "routing": None}, ENGINE) if c.name != ROUTER_CENTRE]
    two = point_centres(routed_point(router_s=0.0), ENGINE)
    x1 = mva_on_centres(one, 40)[-1]["throughput_rps"]
    x2 = mva_on_centres(two, 40)[-1]["throughput_rps"]
    assert x1 == pytest.approx(1000 / 200, rel=1e-3) and x2 == pytest.approx(2 * x1, rel=1e-3)


def test_two_over_one_states_the_ratio_its_interval_and_the_prediction():
    found = two_over_one([2.0, 2.2], [3.0, 3.2], predicted_many_rps=4.0, predicted_one_rps=2.0, replicas=2,
                         confidence=0.95)
    assert found["ratio"] == pytest.approx((3.0 * 3.2) ** 0.5 / (2.0 * 2.2) ** 0.5)
    assert found["lo"] < found["ratio"] < found["hi"] and found["predicted_ratio"] == 2.0
    assert found["measured_one_rps"] == pytest.approx(2.1) and found["measured_many_rps"] == pytest.approx(3.1)
    tight = two_over_one([2.0, 2.0, 2.01], [3.0, 3.0, 3.01], None, None, 2, 0.95)
    assert tight["scales"].startswith("below 2x") and tight["predicted_ratio"] is None
    assert two_over_one([], [3.0], None, None, 2, 0.95)["scales"] == "not measured"
    assert "no interval" in two_over_one([2.0], [3.0], None, None, 2, 0.95)["scales"]


@given(st.floats(0.5, 10), st.floats(0.5, 10), st.integers(2, 4))
def test_equal_repetitions_give_the_plain_ratio(one, many, n):
    found = two_over_one([one, one], [many, many], None, None, n, 0.95)
    assert found["ratio"] == pytest.approx(many / one)
    assert found["lo"] == pytest.approx(found["ratio"]) and found["hi"] == pytest.approx(found["ratio"])
