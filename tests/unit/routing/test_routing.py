"""Replicas behind a router, without engines: the arm's schema refuses what cannot run (naming
the field and the fix), the registry lists every kind, the client's own round robin spreads a
point evenly, sglang-router's exposition is read per replica, and the per-point arithmetic."""
import pytest
from stackbook.config.errors import CampaignError
from stackbook.config.loading import load_campaign
from stackbook.loadgen.drivers import Target, run_closed_loop
from stackbook.loadgen.workload import ApproximateTokenizer, PromptSpec
from stackbook.measure.telemetry import parse_exposition
from stackbook.routing.figures import added_latency, counter_delta, imbalance, replica_figures
from stackbook.routing.registry import ROUTERS, router_class, router_kinds
from stackbook.routing.sglang_router import SglangRouter

CAMPAIGN = """
name: r
protocol:
  workload: {kind: synthetic, prompt_tokens: 64, output_tokens: 8}
  arrival: {kind: closed_loop, concurrency: [1]}
arms:
  - name: a
    engine: {kind: llama_cpp}
    ARM
"""


def problem(write_campaign, arm_lines: str) -> str:
    with pytest.raises(CampaignError) as err:
        load_campaign(write_campaign(CAMPAIGN.replace("ARM", arm_lines)))
    return str(err.value)


@pytest.mark.parametrize("arm_lines, expected", [
    ("router: {kind: sglang}",
     ["router: a router needs replicas of 2 or more", "set replicas: 2 or more, or remove router"]),
    ("replicas: 2", ["replicas: 2 replicas need a router", "{kind: client_round_robin}"]),
    ("replicas: 2\n    router: {kind: sglang, policy: cache-aware}",
     ["arms[0].router.policy", "'cache_aware'", "(got 'cache-aware')", "use one of the allowed values"]),
    ("replicas: 2\n    router: {kind: sglang-router}", ["arms[0].router.kind: unknown kind 'sglang-router'",
                                                         "did you mean 'sglang'"]),
    ("replicas: 0", ["arms[0].replicas", "greater than or equal to 1"]),
    ("replicas: 2\n    router: {kind: sglang, extra_args: [--policy, random]}",
     ["entry 0 ('--policy') is a flag the deployment sets itself, from router.policy"]),
])
def test_what_cannot_run_is_refused_with_its_fix(write_campaign, arm_lines, expected):
    said = problem(write_campaign, arm_lines)
    for part in expected:
        assert part in said, said


def test_a_fixed_port_or_known_delay_cannot_serve_replicas(write_campaign):
    text = CAMPAIGN.replace("engine: {kind: llama_cpp}", "engine: {kind: llama_cpp, port: 1}")
    with pytest.raises(CampaignError, match="engine.port: every replica listens on its own port"):
        load_campaign(write_campaign(text.replace("ARM", "replicas: 2\n    router: {kind: client_round_robin}")))
    assert "known_delay: the harness's delay relay stands in front of one engine" in problem(
        write_campaign, "replicas: 2\n    router: {kind: client_round_robin}\n    known_delay: {tpot_ms: 5}")


def test_one_replica_is_today_and_two_take_a_router(write_campaign):
    c = load_campaign(write_campaign(CAMPAIGN.replace("ARM", "")))
    assert (c.arms[0].replicas, c.arms[0].router) == (1, None)
    c = load_campaign(write_campaign(CAMPAIGN.replace("ARM",
                                                      "replicas: 2\n    router: {kind: sglang, policy: power_of_two}")))
    assert (c.arms[0].replicas, c.arms[0].router.kind, c.arms[0].router.policy) == (2, "sglang", "power_of_two")


def test_registry_lists_each_kind_once_by_its_tag():
    assert router_kinds() == ["sglang", "client_round_robin"]
    for kind, cls in ROUTERS.items():
        assert cls.spec_model.kind_name() == kind and cls.kind == kind
    assert SglangRouter.spec_model.policies() == ("random", "round_robin", "cache_aware", "power_of_two")
    with pytest.raises(KeyError, match="router kinds: sglang, client_round_robin"):
        router_class("nginx")
    assert not ROUTERS["client_round_robin"].runs_process and ROUTERS["client_round_robin"].is_installed()


def test_client_round_robin_sends_to_each_replica_in_turn(start_calibration_server):
    servers = [start_calibration_server(), start_calibration_server()]
    target = router_class("client_round_robin").route(
        Target(servers[0].base_url, "calibration", {"temperature": 0}, {"max_tokens": 2}),
        [s.base_url for s in servers])
    prompts = [PromptSpec(i, [{"role": "user", "content": "x"}], 1) for i in range(10)]
    recs = run_closed_loop(target, prompts, ApproximateTokenizer(), concurrency=2, warmup=0, writer=None,
                           base={"run_id": "t", "arm": "a", "point": "p", "concurrency": 2})
    assert all(r.ok for r in recs) and len(recs) == 10
    assert [s.requests for s in servers] == [5, 5]


# What sglang-router 0.3.2 exported after 9 streamed requests, one replica stopped after the fifth.
ROUTER_BEFORE = """
smg_worker_cb_outcomes_total{worker="http://127.0.0.1:38202",outcome="success"} 2
smg_worker_cb_outcomes_total{worker="http://127.0.0.1:38201",outcome="success"} 3
smg_router_requests_total{router_type="http",backend_type="regular",connection_mode="http",model="m",endpoint="chat",streaming="true"} 5
smg_router_upstream_responses_total{router_type="http",status_code="200",error_code=""} 5
"""  # noqa: E501 - the exposition lines as the router served them
ROUTER_AFTER = """
smg_worker_cb_outcomes_total{worker="http://127.0.0.1:38202",outcome="success"} 2
smg_worker_cb_outcomes_total{worker="http://127.0.0.1:38201",outcome="success"} 7
smg_worker_cb_outcomes_total{worker="http://127.0.0.1:38202",outcome="failure"} 4
smg_worker_selection_total{worker_type="regular",connection_mode="http",model="m",policy="round_robin"} 13
smg_worker_retries_total{worker_type="regular",endpoint="chat"} 4
smg_router_requests_total{router_type="http",backend_type="regular",connection_mode="http",model="m",endpoint="chat",streaming="true"} 9
smg_router_upstream_responses_total{router_type="http",status_code="500",error_code="call_upstream_request_error"} 4
smg_router_upstream_responses_total{router_type="http",status_code="200",error_code=""} 9
smg_worker_cb_state{worker="http://127.0.0.1:38201"} 0
smg_worker_cb_state{worker="http://127.0.0.1:38202"} 1
smg_router_request_duration_seconds_sum{router_type="http",backend_type="regular",connection_mode="http",model="m",endpoint="chat"} 0.2
smg_router_request_duration_seconds_count{router_type="http",backend_type="regular",connection_mode="http",model="m",endpoint="chat"} 4
"""  # noqa: E501 - the exposition lines as the router served them


def test_sglang_router_counts_read_per_replica():
    delta = counter_delta(parse_exposition(ROUTER_BEFORE), parse_exposition(ROUTER_AFTER))
    urls = ["http://127.0.0.1:38201", "http://127.0.0.1:38202"]
    assert SglangRouter.served_by_worker(delta, urls) == [4.0, 0.0]
    counts = SglangRouter.router_counts(delta)
    assert counts["requests"] == 4 and counts["selections"] == 13 and counts["retries"] == 4
    assert counts["failed_attempts_by_replica"] == {"http://127.0.0.1:38202": 4.0}
    assert counts["upstream_status"] == {"500": 4.0, "200": 4.0}
    assert counts["circuit_open_at_end"] == ["http://127.0.0.1:38202"]
    assert counts["request_duration_ms_mean"] == 50.0


class Series:
    prompt_token_counters = ("prompt_tokens_total",)
    generated_token_counters = ("tokens_predicted_total",)
    cache_hit_counters = ("e:prompt_tokens_cached_total",)


def test_replica_figures_by_hand():
    deltas = [{"e:prompt_tokens_total": 300.0, "e:tokens_predicted_total": 60.0},
              {"e:prompt_tokens_total": 100.0, "e:tokens_predicted_total": 20.0}]
    # 8 requests of 100 prompt tokens: 6 and 2 by the router's count
    f = replica_figures(deltas, [3.0, 1.0], 10.0, 1, Series, [6.0, 2.0], "router", 8, 800)
    assert f["request_shares"] == [0.75, 0.25] and f["imbalance_max_over_mean"] == 1.5
    assert [r["prefix_hit_rate"] for r in f["replicas"]] == [0.5, 0.5]  # 300 of 600, 100 of 200 computed
    assert f["prefix_hit_rate_source"].startswith("inferred")
    # the replicas' own cache counters, where their kind exports them: measured
    deltas[0]["e:prompt_tokens_cached_total"], deltas[1]["e:prompt_tokens_cached_total"] = 100.0, 300.0
    f = replica_figures(deltas, [3.0, 1.0], 10.0, 1, Series, [6.0, 2.0], "router", 8, 800)
    assert [r["prefix_hit_rate"] for r in f["replicas"]] == [0.25, 0.75]
    assert f["prefix_hit_rate_source"].startswith("measured")
    assert [r["busy_fraction_cpu"] for r in f["replicas"]] == [0.3, 0.1]
    # no router counts: requests inferred from the generated tokens, 60:20 of 8
    f = replica_figures(deltas, [None, None], 10.0, 1, Series, None, "", 8, 800)
    assert f["replicas"][0]["busy_fraction_cpu"] is None
    assert [r["requests"] for r in f["replicas"]] == [6.0, 2.0] and "inferred" in f["requests_source"]
    assert imbalance([5, 5]) == 1.0 and imbalance([0, 0]) is None


def test_added_latency_is_the_difference_of_medians():
    a = added_latency([0.010, 0.011, 0.012, 0.013], [0.012, 0.013, 0.014, 0.015])
    assert a["added_ms"] == pytest.approx(2.0) and a["requests_each_way"] == 4 and "inferred" in a["how"]


def test_gauges_of_several_replicas_are_summed(start_calibration_server):
    from stackbook.measure.telemetry import engine_gauges
    servers = [start_calibration_server(), start_calibration_server()]
    servers[0].running, servers[1].running = 2, 3  # requests each is serving, as its gauge reports them
    assert engine_gauges([s.base_url for s in servers], "/metrics") == {"calibration:num_requests_running": 5.0}
    assert engine_gauges(servers[1].base_url, "/metrics") == {"calibration:num_requests_running": 3.0}
