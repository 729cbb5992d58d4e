"""The fairness check's prefix-cache column from the replies' cached tokens: the template's head
every request shares reads cold, reuse of the workload's own content reads warm, arms that depart
from the protocol alike are comparable with each other, and an arm kept out is told the setting
that would bring it back. Records as llama-server reported them for SmolLM2: 128 tokens of
content, 158 prompt tokens, 24 served to every request after the first from the template's head."""
import pandas as pd
import pytest
from stackbook.analysis import comparison
from stackbook.analysis.fairness import fairness_table
from stackbook.config.loading import parse_campaign
from stackbook.measure.prefix_cache import cache_counters

from tests.support.records import request_record
from tests.unit.analysis.test_fairness import CAMPAIGN, observed

HEAD, REUSED = 24, 157  # a new prompt: the head only; a prompt the server saw before: all but one token


class NoCounters:
    cache_hit_counters = cache_query_counters = ()


def served(cached_by_point: dict[str, int], state: str = "cold") -> dict:
    """An arm whose every point's 12 measured requests were each served `cached` tokens from cache
    (the first after the flush none), its split taken as a run takes it."""
    arm = observed()
    for name, cached in cached_by_point.items():
        records = [request_record(point=name, request_index=i, prompt_tokens_client=128, prompt_tokens_server=158,
                                  cached_prompt_tokens=0 if i == 0 and cached == HEAD else cached) for i in range(12)]
        arm["results"]["sweep"]["points"][name]["prefix_cache"] = {"state": state} | cache_counters({}, records,
                                                                                                   NoCounters())
    return arm


def table(arms: list[dict], **protocol) -> pd.DataFrame:
    names = ["fast", "fast-again", "slow"][:len(arms)]
    c = parse_campaign({**CAMPAIGN, "protocol": {**CAMPAIGN["protocol"], **protocol},
                        "arms": [{"name": n, "engine": {"kind": "openai_endpoint", "base_url": "http://127.0.0.1:8080/v1"}}
                                 for n in names]})
    return fairness_table(c, {arm.name: {"arm": arm, **data} for arm, data in zip(c.arms, arms)})


def test_a_template_head_every_request_shares_reads_cold():
    f = table([served({"c1-r0": HEAD, "c2-r0": HEAD}), served({"c1-r0": HEAD, "c2-r0": HEAD})])
    assert f["comparable"].all() and list(f["remedy"]) == ["", ""]
    assert f.loc["fast", "prefix_cache"] == ("cold apart from the 24-token template head every request shares "
                                             "(configured cold): at most 14% of prompt tokens from cache (0% of the "
                                             "workload's own), over 2 point(s)")


def test_reuse_of_the_workloads_own_prompts_reads_warm_and_is_kept_out_with_the_setting_to_change():
    """One arm meets the prompts new; the other is sent the same prompts after it, by one server."""
    f = table([served({"c1-r0": HEAD, "c2-r0": HEAD}), served({"c1-r0": REUSED, "c2-r0": REUSED})])
    assert f.loc["fast-again", "prefix_cache"] == ("warm (configured cold): at most 99% of prompt tokens from cache "
                                                   "(99% of the workload's own, beyond the template's tokens), "
                                                   "over 2 point(s)")
    assert list(f["comparable"]) == [True, False] and f.loc["fast-again", "differs"] == "prefix_cache"
    assert f.loc["fast-again", "remedy"].startswith("set protocol.cache_salt: true")


def test_arms_with_the_same_realized_state_are_comparable_with_each_other_and_the_table_says_so():
    """Every arm sent prompts the server had seen: all warm against a cold protocol, alike."""
    f = table([served({"c1-r0": REUSED, "c2-r0": REUSED}), served({"c1-r0": REUSED, "c2-r0": REUSED - 2})])
    assert f["comparable"].all() and list(f["differs"]) == ["", ""]
    assert f.loc["fast", "prefix_cache"].endswith(
        "; departs from the protocol alike in 2 arms: comparable with each other, not with a cold cache")


def test_the_arm_whose_cache_departs_unlike_the_others_is_kept_out():
    """The newcomer's three endpoint arms in front of one server, the defaults: the first arm met
    its first point's prompts new, every later point and arm was served them again."""
    f = table([served({"c1-r0": HEAD, "c2-r0": REUSED}), served({"c1-r0": REUSED, "c2-r0": REUSED}),
               served({"c1-r0": REUSED, "c2-r0": REUSED})])
    assert list(f["comparable"]) == [False, True, True] and f.loc["fast", "differs"] == "prefix_cache"


def test_two_arms_that_depart_unlike_each_other_both_differ():
    f = table([served({"c1-r0": REUSED, "c2-r0": REUSED}), served({"c1-r0": 100, "c2-r0": 100})])
    assert list(f["comparable"]) == [False, False]


def test_the_verdict_says_which_setting_would_make_the_arms_comparable():
    f = table([served({"c1-r0": HEAD, "c2-r0": HEAD}), served({"c1-r0": REUSED, "c2-r0": REUSED})])
    df = pd.DataFrame({"arm": ["fast", "fast-again"], "label": "accepted", "point": "c1-r0", "discarded": False})
    assert comparison.not_ranked_lines(df, f) == [
        "Not comparable (protocol differs): fast-again. To make them comparable: set protocol.cache_salt: true "
        "(each arm's points then open with their own salt, so no request is served what another arm or point "
        "sent, apart from the template's head)."]


def test_salted_points_still_warm_are_told_to_prime_a_warm_cache():
    f = table([served({"c1-r0": HEAD, "c2-r0": HEAD}), served({"c1-r0": REUSED, "c2-r0": REUSED})], cache_salt=True)
    assert f.loc["fast-again", "remedy"].startswith("set protocol.prefix_cache: warm")


@pytest.mark.parametrize("shared_prefix, kept", [(None, True), ({"groups": 2, "tokens": 32}, False)])
def test_a_warm_protocol_is_kept_by_the_head_alone_only_where_the_workload_shares_nothing_of_its_own(
        shared_prefix, kept):
    """Nothing to prime but the template's head: a cache that served the head did all a warm
    protocol asks. With group prefixes to prime, the head alone is a cache that did not keep them."""
    workload = {**CAMPAIGN["protocol"]["workload"], "shared_prefix": shared_prefix}
    f = table([served({"c1-r0": HEAD, "c2-r0": HEAD}, "warm")], prefix_cache="warm", workload=workload)
    assert bool(f.loc["fast", "comparable"]) is kept
    if not kept:
        assert f.loc["fast", "remedy"] == "set protocol.prefix_cache: cold, or turn the engine's prefix cache on"
