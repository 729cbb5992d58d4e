"""The fairness check from what each arm did: each of the six things, changed alone on one arm,
makes it not comparable and is named; identical arms are comparable; a declared variable is
allowed; nothing observed on either side is not a difference. What the protocol fixes (the
decoding, the warm-up and measured requests, the prefix-cache state) is held against it."""
import copy

import pytest
from stackbook.analysis.fairness import NOT_OBSERVED, fairness_table
from stackbook.config.loading import parse_campaign

CAMPAIGN = {
    "name": "t",
    "protocol": {"workload": {"kind": "synthetic", "prompt_tokens": 64, "output_tokens": 16},
                 "arrival": {"kind": "closed_loop", "concurrency": [1, 2]},
                 "warmup_requests": 2, "requests_per_point": 12},
    "arms": [{"name": "a", "engine": {"kind": "llama_cpp"}}, {"name": "b", "engine": {"kind": "vllm_cpu"}}],
}
DIGEST = "7ef915c9bf9d94d8d70211970476878352a5b95855c589ae987916d7a455242b"


def observed() -> dict:
    """One arm's engine.json and results as a run writes them."""
    return {
        "engine": {"model": {"name": "m", "hf_weights_sha256": DIGEST, "gguf_sha256": "5d8a" * 16,
                             "source_artifact": {"sha256": "b179" * 16}},
                   "identity": {"chat_template_sha256": "872b" * 16},
                   "realized_capacity": {"kv_type": "bf16", "kv_tokens": 8192}},
        "results": {"sweep": {"points": {
            f"c{c}-r0": {"requests": 12, "completed": 12, "concurrency": c, "in_flight_mean": c * 0.97,
                         "prompts_sha256": f"{c}" * 64, "bodies_sha256": f"{c + 1}" * 64,
                         "decoding_sent": [{"temperature": 0.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0,
                                            "repetition_penalty": 1.0}],
                         "output_tokens_server_mean": 16.0,
                         "phases_sent": {"warmup": 2, "measure": 12, "cooldown": c - 1}}
            for c in (1, 2)}}}}


def arms_of(campaign, a: dict, b: dict) -> dict:
    return {arm.name: {"arm": arm, **data} for arm, data in zip(campaign.arms, (a, b))}


def point(arm: dict, name: str = "c2-r0") -> dict:
    return arm["results"]["sweep"]["points"][name]


CHANGES = {
    "model": lambda b: b["engine"]["model"].update(hf_weights_sha256="0" * 64),
    "precision": lambda b: b["engine"]["realized_capacity"].update(kv_type="q8_0"),
    "decoding": lambda b: point(b)["decoding_sent"][0].update(temperature=0.7),
    "prompts": lambda b: point(b).update(prompts_sha256="f" * 64),
    "output_lengths": lambda b: point(b).update(output_tokens_server_mean=12.0),
    "arrival": lambda b: point(b).update(in_flight_mean=1.4),
    "window": lambda b: point(b).update(phases_sent={"warmup": 0, "measure": 12, "cooldown": 1}),
}


def test_identical_arms_are_comparable():
    c = parse_campaign(CAMPAIGN)
    f = fairness_table(c, arms_of(c, observed(), observed()))
    assert f["comparable"].all() and list(f["differs"]) == ["", ""]
    assert f.loc["b", "precision"] == '{"kv_cache": "bf16", "state": "none", "weights": "bf16"}'
    assert f.loc["b", "kv_precision_from"] == "engine log"
    assert f.loc["b", "prompts"].startswith("2 point(s), sha256 ")


@pytest.mark.parametrize("field", sorted(CHANGES))
def test_one_difference_makes_the_arm_not_comparable_and_is_named(field):
    c = parse_campaign(CAMPAIGN)
    b = observed()
    CHANGES[field](b)
    f = fairness_table(c, arms_of(c, observed(), b))
    if field in HELD_TO_PROTOCOL:  # the arm that kept the protocol is comparable, the other is not
        assert list(f["comparable"]) == [True, False] and f.loc["b", "differs"] == field
        return
    # Two arms that disagree: neither is the reference, so neither is comparable, each naming the field.
    assert list(f["comparable"]) == [False, False]
    assert f.loc["a", "differs"] == f.loc["b", "differs"] == field


HELD_TO_PROTOCOL = ("decoding", "window")


@pytest.mark.parametrize("field", HELD_TO_PROTOCOL)
def test_arms_that_all_depart_from_the_protocol_alike_all_differ(field):
    """Agreeing with each other is not keeping the protocol: two arms sampled at temperature 0.7
    under a greedy protocol (or both sent no warm-up where it asks for 2) are both not comparable."""
    c = parse_campaign(CAMPAIGN)
    a, b = observed(), observed()
    CHANGES[field](a)
    CHANGES[field](b)
    f = fairness_table(c, arms_of(c, a, b))
    assert list(f["comparable"]) == [False, False] and list(f["differs"]) == [field, field]


def test_with_three_arms_the_odd_one_differs_whichever_comes_first():
    c = parse_campaign({**CAMPAIGN, "arms": CAMPAIGN["arms"] + [{"name": "c", "engine": {"kind": "vllm_cpu"}}]})
    odd = observed()
    CHANGES["model"](odd)
    f = fairness_table(c, {arm.name: {"arm": arm, **d} for arm, d in zip(c.arms, (odd, observed(), observed()))})
    assert list(f["comparable"]) == [False, True, True] and f.loc["a", "differs"] == "model"


def _with_cache(arm: dict, hit_rate: float) -> dict:
    for s in arm["results"]["sweep"]["points"].values():
        s["prefix_cache"] = {"state": "cold", "engine_hit_rate": hit_rate}
    return arm


def test_the_prefix_cache_is_held_against_the_protocol_not_the_first_arm():
    """quickstart/avx2-host: the first arm served 15% of prompt tokens from a cache the protocol
    said was cold; it departs from the protocol, and the cold arm after it does not."""
    c = parse_campaign(CAMPAIGN)
    f = fairness_table(c, arms_of(c, _with_cache(observed(), 0.15), _with_cache(observed(), 0.0)))
    assert list(f["comparable"]) == [False, True] and f.loc["a", "differs"] == "prefix_cache"
    assert f.loc["a", "prefix_cache"].startswith("warm (configured cold): at most 15%")


def test_a_log_whose_sessions_re_send_prefixes_may_be_served_from_cache_by_either_arm():
    """A replayed agent log: the cache starts cold at each point and the log's own sessions fill it
    (55% implied). An engine that reuses it and one that does not both keep the protocol; the
    realized rate beside the implied one is what is measured."""
    from stackbook.locations import REPO_ROOT
    log = {"kind": "trace", "path": str(REPO_ROOT / "campaigns/traces/example-openai.jsonl"), "format": "openai"}
    c = parse_campaign({**CAMPAIGN, "protocol": {**CAMPAIGN["protocol"], "arrival": log, "context_length": 2048}})
    a, b = _with_cache(observed(), 0.4), _with_cache(observed(), 0.0)
    for arm in (a, b):  # a trace point's name and its own count of requests
        pts = arm["results"]["sweep"]["points"]
        arm["results"]["sweep"]["points"] = {"trace-r0": pts["c1-r0"]}
    f = fairness_table(c, arms_of(c, a, b))
    assert "prefix_cache" not in str(f.loc["a", "differs"]) and "prefix_cache" not in str(f.loc["b", "differs"])
    assert f.loc["a", "prefix_cache"].startswith("warm (configured cold): at most 40%")
    assert f.loc["a", "prefix_cache"].endswith("the workload's own prompts imply 55%")


def test_the_committed_avx2_run_reads_the_template_head_apart_from_reuse():
    """quickstart/avx2-host was recorded before the split: llama-server served 24 of each request's
    158 prompt tokens from cache (15%), all of them the chat template's head; read again from its
    raw records, the arm is cold apart from that head and comparable."""
    from pathlib import Path

    from stackbook.analysis.run_data import load_run

    campaign, arms = load_run(Path("outputs/quickstart/avx2-host"))
    f = fairness_table(campaign, arms)
    assert f.loc["llama-cpp", "prefix_cache"] == (
        "cold apart from the 24-token template head every request shares (configured cold): at most 15% of prompt "
        "tokens from cache (0% of the workload's own), over 2 point(s)")
    assert f["comparable"].all(), f["differs"]


@pytest.mark.parametrize("field, declared", [("decoding", "decoding.temperature"), ("precision", "precision.kv_cache"),
                                             ("arrival", "arrival"), ("output_lengths", "workload.output_tokens")])
def test_a_declared_variable_is_allowed(field, declared):
    c = parse_campaign({**CAMPAIGN, "variables_under_test": [declared]})
    b = observed()
    CHANGES[field](b)
    f = fairness_table(c, arms_of(c, observed(), b))
    assert f["comparable"].all()


def test_realized_load_and_lengths_within_their_tolerance_are_the_same():
    c = parse_campaign(CAMPAIGN)
    b = observed()
    point(b).update(in_flight_mean=2 * 0.97 * 1.05, output_tokens_server_mean=16.2)
    assert fairness_table(c, arms_of(c, observed(), b))["comparable"].all()


def test_a_different_set_of_points_is_a_different_arrival():
    c = parse_campaign(CAMPAIGN)
    b = observed()
    b["results"]["sweep"]["points"]["c4-r0"] = copy.deepcopy(point(b)) | {"in_flight_mean": 3.9}
    assert fairness_table(c, arms_of(c, observed(), b)).loc["b", "differs"] == "arrival"


def test_kv_precision_falls_back_to_the_configured_one_where_the_engine_logs_none():
    c = parse_campaign(CAMPAIGN)
    b = observed()
    del b["engine"]["realized_capacity"]["kv_type"]
    f = fairness_table(c, arms_of(c, observed(), b))
    assert f["comparable"].all() and f.loc["b", "kv_precision_from"] == "configured"


def test_nothing_observed_on_both_sides_is_not_a_difference():
    """The seed campaign: sizing-only arms, no engine ran; the reference arm is comparable to itself."""
    c = parse_campaign({**CAMPAIGN, "arms": CAMPAIGN["arms"] + [{"name": "c", "engine": {"kind": "vllm_cpu"}}]})
    arms = {arm.name: {"arm": arm, "engine": {}, "results": {"sizing": {"note": "x"}}} for arm in c.arms}
    f = fairness_table(c, arms)
    assert f["comparable"].all() and list(f["differs"]) == ["", "", ""]
    assert f.loc["a", "model"] == NOT_OBSERVED and f.loc["a", "decoding"] == NOT_OBSERVED


def test_an_arm_that_observed_nothing_is_not_made_different_by_it():
    c = parse_campaign(CAMPAIGN)
    f = fairness_table(c, arms_of(c, {"engine": {}, "results": {}}, observed()))
    assert f["comparable"].all()


def test_the_load_of_a_discarded_point_does_not_make_the_arm_unfair():
    """A closed-loop point the load rule discarded on one arm (in flight 1.4 of 2) stays out of the
    ranking; the arm's other points still compare."""
    c = parse_campaign(CAMPAIGN)
    b = observed()
    CHANGES["arrival"](b)
    CHANGES["output_lengths"](b)
    point(b)["discarded"] = True
    assert fairness_table(c, arms_of(c, observed(), b))["comparable"].all()


@pytest.mark.parametrize("order", ["timestamp", "session"])
def test_a_replayed_logs_load_is_its_send_rate_by_timestamp_and_its_steps_by_session(order):
    """By timestamp the schedule fixes the send rate, whatever the engine; by session each step
    waits for its reply, so the rate and the requests in flight follow the engine (a slow one holds
    more in flight) and what both arms must share is the steps their sessions sent."""
    from stackbook.locations import REPO_ROOT
    log = {"kind": "trace", "path": str(REPO_ROOT / "campaigns/traces/example-openai.jsonl"), "format": "openai",
           "order": order}
    c = parse_campaign({**CAMPAIGN, "protocol": {**CAMPAIGN["protocol"], "arrival": log, "context_length": 2048}})
    a, b = observed(), observed()
    for arm, in_flight, rate in ((a, 2.3, 0.86), (b, 3.5, 0.41)):  # b answers slower
        p = dict(point(arm, "c1-r0"), in_flight_mean=in_flight, achieved_rate_rps=rate,
                 session_order={"sessions": 4, "steps": 12, "out_of_order": 0, "before_previous_reply": 0})
        arm["results"]["sweep"]["points"] = {"trace-r0": p}
    f = fairness_table(c, arms_of(c, a, b))
    if order == "session":
        assert bool(f.loc["a", "comparable"]) and bool(f.loc["b", "comparable"])
        point(b, "trace-r0")["session_order"]["steps"] = 9  # one arm's sessions stopped short
        assert "arrival" in str(fairness_table(c, arms_of(c, a, b)).loc["b", "differs"])
    else:
        assert "arrival" in str(f.loc["b", "differs"]) or "arrival" in str(f.loc["a", "differs"])
