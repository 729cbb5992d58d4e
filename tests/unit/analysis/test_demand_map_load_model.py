"""Which network the demand map predicts a point with (a closed loop's clients, a replayed log's
sessions as the closed loop they are, an open loop's offered rate), the engine's scheduler and
compute held together, the model set against its own point before it ranks anything, and a
throughput above the bound said in words."""
import pytest

from stackbook.analysis.demand_map import (
    OWN_POINT_TOLERANCE,
    Layer,
    bound_table,
    closed_response_ms,
    measured_demand_map,
    mva_on_centres,
    point_load,
    series_centres,
    session_replay,
)
from stackbook.analysis.demand_map.load_model import own_point_refusal
from stackbook.analysis.demand_map.measured import above_bound

LLAMA = {"kind": "llama_cpp", "launch": {"command": ["llama-server", "--threads", "1"]}}
SESSIONS = {"kind": "trace", "order": "session", "think_s": None}
BY_TIMESTAMP = {"kind": "trace", "order": "timestamp"}


def replay_point(e2e_ms=2609.0):
    """A replayed log's point as agent-log's llama-cpp recorded it: 12 requests, 0.5 s of client
    CPU and 12.73 s of llama-server's (41.7 and 1,060.8 ms per request), 2.29 in flight, its
    schedule's timestamps implying 0.881 req/s."""
    return {"level": "trace", "load": 1.0, "speedup": 1.0, "requests": 12, "completed": 12,
            "e2e_ms_mean": e2e_ms, "request_throughput_rps": 0.876, "scheduled_rate_rps": 0.8808,
            "in_flight_mean": 2.29, "engine_in_flight_mean": 2.29, "output_tokens": 277,
            "session_order": {"sessions": 4, "steps": 12, "out_of_order": 0, "before_previous_reply": 0},
            "cpu_seconds": {"client": 0.5, "engine": {"llama_server": 12.73}}, "requests_in_cpu_window": 12,
            "cpu_window_s": 14.0, "work_tokens": {"generated_tokens": 277}}


def replay(arrival, e2e_ms=2609.0):
    results = {"sweep": {"points": {"trace-r0": replay_point(e2e_ms)}, "load_validity": {}}}
    return measured_demand_map("llama-cpp", results, LLAMA, "", "accepted", None,
                               {"ttft_ms": 2000, "tpot_ms": 200}, arrival)


def test_a_session_replay_is_known_from_the_protocol_s_arrival_not_from_its_points():
    assert session_replay(SESSIONS)
    assert not session_replay(BY_TIMESTAMP) and not session_replay(None)
    assert not session_replay({"kind": "poisson", "order": "session"})


def test_a_session_replay_is_a_closed_network_at_the_mean_in_flight():
    """Exact MVA on D = 41.67 and 1,060.83 ms: R(2) = 2,124.8 and R(3) = 3,182.7 ms, so at the
    2.29 in flight R = 2,124.8 + 0.29 x 1,057.9 = 2,431.6 ms against the 2,609 measured (-6.8%).
    Read as an open network at the schedule's 0.881 req/s, the same demands put the engine at
    U = 0.93 and predict 16,210 ms: the 16.2 s baseline a replay paced by its engine never had."""
    d = replay(SESSIONS)
    assert d.offered_load == ("a replayed log's 4 sessions, each step after the reply before it "
                              "(2.29 in flight on average)")
    assert d.load_model.startswith("a closed network of the replayed sessions at N = 2.29")
    assert "their throughput is no offered rate" in d.load_model
    assert d.own_point_e2e_ms == pytest.approx(2431.598, rel=1e-5)
    assert d.own_point_error_pct == pytest.approx(100 * (2431.598 / 2609 - 1), rel=1e-4)
    top = d.next_experiments[0]
    assert top["centre"] == "engine compute" and top["at_load"] == "N=2.29 in flight"
    assert "req/s offered" not in top["expected_gain"]

    opened = replay(BY_TIMESTAMP)   # the same point had the log been replayed by its timestamps
    assert opened.load_model == "an open network at the 0.881 req/s its schedule offered"
    assert opened.own_point_e2e_ms == pytest.approx(16210.06, rel=1e-5)
    assert opened.next_experiments == [] and opened.next_experiments_note.startswith(
        "no candidate is ranked: the model misses its own point, predicting 16,210 ms mean E2E at trace-r0 where "
        "2,609 ms was measured (+521%")


def test_a_session_replay_outside_the_slo_is_told_to_replay_fewer_sessions_not_a_lighter_rate():
    d = replay(SESSIONS, e2e_ms=2500.0)
    slow = measured_demand_map("llama-cpp", {"sweep": {"points": {"trace-r0": replay_point(2500.0)},
                                                        "load_validity": {}}},
                               LLAMA, "", "accepted", None, {"e2e_ms": 1000}, SESSIONS)
    assert d.next_experiments and slow.next_experiments == []
    assert slow.next_experiments_note.endswith("so a lighter one means replaying fewer sessions (arrival.sessions), "
                                               "not a lower rate")
    assert "test a lighter load first" not in slow.next_experiments_note


def test_a_session_replay_without_an_in_flight_mean_is_not_predicted():
    load = point_load({k: v for k, v in replay_point().items() if "in_flight" not in k}, SESSIONS)
    assert not load.predicts and load.model.startswith("none: a replayed log's sessions form a closed loop")


def test_the_closed_network_between_whole_populations_by_hand():
    # one centre of 100 ms: R(N) = 100 N exactly, so N = 2.5 reads 250 ms; below one, one client
    assert closed_response_ms([Layer("a", 1, 100.0)], 2.5) == pytest.approx(250.0)
    assert closed_response_ms([Layer("a", 1, 100.0)], 0.4) == pytest.approx(100.0)
    assert closed_response_ms([Layer("a", 1, 100.0)], 3) == pytest.approx(mva_on_centres([Layer("a", 1, 100.0)], 3)[-1]
                                                                        ["response_ms"])


def test_the_scheduler_and_the_compute_it_works_beside_are_one_centre_in_the_response():
    """vLLM at concurrency 1 (capacity's c1-r0): 11.6 + 19.1 ms of client and front end, 595.6 ms of
    EngineCore and 657.8 of the worker per request, 702 ms measured. In series they would take
    1,284 ms, more than the request took; held together, 11.6 + 19.1 + 657.8 = 688.5 ms."""
    centres = [Layer("client", 1, 11.6), Layer("engine front end", 1, 19.1), Layer("engine scheduler", 1, 595.6),
               Layer("engine compute", 1, 657.8)]
    series = series_centres(centres)
    assert [c.name for c in series] == ["client", "engine front end", "engine scheduler + compute (held together)"]
    assert series[-1].adjusted_ms == pytest.approx(657.8) and "engine compute" in series[-1].why_m
    assert mva_on_centres(centres, 1)[0]["response_ms"] == pytest.approx(688.5)
    # the bound still reads each process apart: the worker is the bottleneck at 657.8 ms
    alone = [Layer("client", 1, 11.6), Layer("engine compute", 1, 657.8)]
    assert series_centres(alone) == alone


def test_a_model_is_refused_beyond_its_own_point_tolerance():
    assert OWN_POINT_TOLERANCE == 0.10
    assert own_point_refusal(9.9, 1099.0, 1000.0, "c2-r0") is None
    assert own_point_refusal(None, float("inf"), 1000.0, "c2-r0") is None   # no finite prediction: the SLO says
    said = own_point_refusal(37.1, 1311.0, 956.0, "c2-r1")
    assert said == ("no candidate is ranked: the model misses its own point, predicting 1,311 ms mean E2E at c2-r1 "
                    "where 956 ms was measured (+37%, beyond the ±10% within which it can say what a 10% cut buys)")


def test_a_throughput_above_the_bound_is_said_within_or_beyond_its_interval():
    """capacity's llama-cpp: 1.988 req/s at c1-r0 against a bound of 1.878 from c2-r1, whose D/m
    varied ±7.26% over its two repetitions: above the bound, inside 1.742 to 2.014 req/s."""
    where, said = above_bound(1.988, "c1-r0", 1.8776, 0.0726, True, "c2-r1")
    assert where == "within its interval"
    assert said.startswith("measured 1.99 req/s at c1-r0 is 1.06x the bound 1.88 req/s from c2-r1: above it, within "
                           "its interval (1.74 to 2.01 req/s, ±7.3%: the bottleneck's D/m 95% CI over the "
                           "repetitions at that load)")
    assert above_bound(2.1, "c1-r0", 1.8776, 0.0726, True, "c2-r1")[0] == "beyond its interval"
    assert "the 5% a single reading allows" in above_bound(1.9, "c1-r0", 1.8776, 0.05, False, "c2-r1")[1]
    assert above_bound(1.8, "c1-r0", 1.8776, 0.0726, True, "c2-r1") is None


def test_the_map_flags_a_throughput_above_its_bound_in_a_field_and_a_sentence():
    """Two closed-loop points on llama-server: c2 bounds it at 1000 / 500 = 2 req/s; c1 ran 2.06
    req/s over its own CPU window (1.03x, inside the 5% a single reading allows)."""
    def pt(c, compute_s, window_s, e2e):
        return {"level": f"c{c}", "load": c, "concurrency": c, "completed": 12, "request_throughput_rps": 12 / window_s,
                "e2e_ms_mean": e2e, "cpu_seconds": {"client": 0.12, "engine": {"llama_server": compute_s}},
                "requests_in_cpu_window": 12, "cpu_window_s": window_s}
    results = {"sweep": {"points": {"c1-r0": pt(1, 5.6, 5.825, 485.0), "c2-r0": pt(2, 6.0, 6.0, 1000.0)},
                         "load_validity": {}}}
    d = measured_demand_map("llama-cpp", results, LLAMA)
    assert d.status == "measured" and d.bound_rps == pytest.approx(2.0)
    assert d.measured_over_bound == pytest.approx(12 / 5.825 / 2.0)
    assert d.above_bound == "within its interval"
    assert d.bound_exceeded.startswith("measured 2.06 req/s at c1-r0 is 1.03x the bound 2 req/s from c2-r0")
    assert bound_table({"llama-cpp": d}).loc["llama-cpp", "above the bound"] == d.bound_exceeded
