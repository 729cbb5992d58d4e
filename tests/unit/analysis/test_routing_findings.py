"""analysis.json's `routing` from a hand-made run of three arms (one replica, two behind round
robin, two behind cache-aware routing): which arms pair, each arm's deployment figures, the
crossover, two over one and the first screen's sentences."""
from types import SimpleNamespace

import pandas as pd
import pytest

from stackbook.analysis.demand_map.layers import Layer
from stackbook.analysis.routing_findings import (
    crossover_table,
    deployment_table,
    first_screen_lines,
    policy_answer,
    policy_pairs,
    routing_findings,
)


def arm(replicas, policy=None):
    router = SimpleNamespace(policy=policy) if policy else None
    return SimpleNamespace(replicas=replicas, router=router, engine=SimpleNamespace(kind="llama_cpp"))


def routed(shares, imbalance):
    return {
        "cpu_seconds": {"client": 1.0, "engine": {"llama_server": 8.0, "router": 0.2}},
        "requests_in_cpu_window": 40,
        "routing": {
            "router": "sglang",
            "policy": "x",
            "replica_count": 2,
            "request_shares": shares,
            "imbalance_max_over_mean": imbalance,
            "realized_hit_rate_reported": 0.5,
            "implied_hit_rate": 0.8,
            "router_counts": {"requests": 40, "retries": 1},
            "router_added_latency": {"added_ms": 0.3, "direct_ms_iqr": 1.0},
            "replicas": [
                {"replica": i, "requests": 40 * s, "cpu_s": 4.0, "prefix_hit_rate": 0.5} for i, s in enumerate(shares)
            ],
        },
    }


def requests(points_ttft: dict[str, list[float]]) -> pd.DataFrame:
    return pd.DataFrame([{"point": p, "phase": "measure", "ok": True, "ttft_ms": t}
                         for p, values in points_ttft.items() for t in values])


def run():
    ttft = {("ca", 2): 100, ("ca", 4): 600, ("rr", 2): 200, ("rr", 4): 400}
    arms, rows = {}, []
    for name, a in (("one", arm(1)), ("rr", arm(2, "round_robin")), ("ca", arm(2, "cache_aware"))):
        points, frames = {}, {}
        for load in (2, 4):
            for rep in (0, 1):
                p = f"c{load}-r{rep}"
                rows.append({"arm": name, "load": load, "point": p,
                             "request_throughput_rps": {"one": 1.0, "rr": 1.6, "ca": 1.5}[name] * (1 + rep / 100)})
                if name != "one":
                    points[p] = routed([0.8, 0.2] if name == "ca" and load == 4 else [0.5, 0.5],
                                       1.6 if name == "ca" and load == 4 else 1.0)
                frames[p] = [ttft.get((name, load), 300) + i for i in range(40)]
        arms[name] = {"arm": a, "results": {"sweep": {"points": points}}, "requests": requests(frames)}
    return arms, pd.DataFrame(rows)


def dmap(compute_m, router_ms=None):
    layers = [Layer("client", 1, 20.0), Layer("engine compute", 8, 100.0, compute_m)]
    if router_ms:
        layers.append(Layer("orchestration (router)", 1, router_ms))
    return SimpleNamespace(measured=True, layers=lambda: layers, unattributed_ms=0.0)


def test_the_routing_section_of_a_three_arm_run():
    arms, ranked = run()
    assert policy_pairs(arms) == [("ca", "rr")]
    found = routing_findings(arms, ranked, {"one": dmap(1), "ca": dmap(2, 5.0), "rr": dmap(2, 5.0)}, 0.95)
    [policy] = found["policies"]
    assert policy["status"] == "crossed" and policy["between"] == [2.0, 4.0]
    assert policy["hotspot"]["hotspot_from_load"] == 4.0 and policy["hotspot_balanced"]["hotspot_from_load"] is None
    ca4 = next(r for r in found["per_arm"] if r["arm"] == "ca" and r["load"] == 4)
    assert ca4["request_shares"] == [0.8, 0.2] and ca4["imbalance"] == 1.6
    assert ca4["router_cpu_ms_per_request"] == pytest.approx(5.0) and ca4["router_retries"] == 2
    assert (ca4["realized_hit_rate"], ca4["implied_hit_rate"]) == (0.5, 0.8)
    scaling = {s["arm"]: s for s in found["scaling"]}
    assert set(scaling) == {"ca", "rr"} and scaling["rr"]["load"] == 4.0
    assert scaling["rr"]["ratio"] == pytest.approx(1.6)
    # one replica's compute (800 ms, m = 1) doubled to m = 2 at 4 clients: close to twice
    assert 1.5 < scaling["rr"]["predicted_ratio"] <= 2.0
    lines = first_screen_lines(found)
    assert lines[0].startswith("TTFT p90: ca's tail stops being lower than rr's near load")
    assert any("a hotspot at load 4" in x for x in lines)
    assert any(x.startswith("Does 2 give 2x? rr over one at load 4: 1.60x measured throughput") for x in lines)
    assert len(deployment_table(found)) == 4 and len(crossover_table(found)) == 2


def test_a_campaign_without_a_router_has_no_routing_section():
    arms, ranked = run()
    assert routing_findings({"one": arms["one"]}, ranked[ranked["arm"] == "one"], {}, 0.95) == {}
    assert first_screen_lines({}) == []


def test_shares_over_repetitions_are_taken_busiest_first():
    """Each repetition starts its replicas anew: a hotspot on replica 0 once and replica 1 next is
    still a hotspot, not an even split."""
    arms, ranked = run()
    points = arms["ca"]["results"]["sweep"]["points"]
    points["c4-r0"] = routed([0.7, 0.3], 1.4)
    points["c4-r1"] = routed([0.3, 0.7], 1.4)
    points["c4-r1"]["routing"]["replicas"][1]["prefix_hit_rate"] = 0.9
    found = routing_findings(arms, ranked, {}, 0.95)
    ca4 = next(r for r in found["per_arm"] if r["arm"] == "ca" and r["load"] == 4)
    assert ca4["request_shares"] == pytest.approx([0.7, 0.3]) and ca4["imbalance"] == pytest.approx(1.4)
    assert ca4["replica_hit_rates"] == pytest.approx([0.7, 0.5])
    assert any("shares 70%/30% (busiest first), imbalance 1.40" in x for x in first_screen_lines(found))


def test_the_answer_line_names_the_crossing_and_the_hotspot():
    arms, ranked = run()
    found = routing_findings(arms, ranked, {}, 0.95)
    decisions = [{"metric": "output_throughput", "arm_a": "rr", "arm_b": "ca", "load": 4.0, "text": "rr ahead of ca."},
                 {"metric": "ttft_p50", "arm_a": "rr", "arm_b": "ca", "load": 4.0, "text": "not this one."}]
    line = policy_answer({"routing": found, "decisions": decisions}, "output_throughput", "output throughput")
    assert line.startswith("ca against rr on output throughput: at 4 rr ahead of ca. Its TTFT p90 stops being "
                           "lower than rr's near load")
    assert line.endswith("a hotspot at load 4 (1.60), the busiest replica at least 1.25x the mean in every "
                         "repetition, not at 2 (1.00).")
    assert policy_answer({"routing": {}}, "output_throughput", "output throughput") is None
