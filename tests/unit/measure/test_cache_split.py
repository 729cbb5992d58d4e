"""Cached prompt tokens told apart: the head every request shares by construction (the chat
template's opening, a fixed system prompt, the salt) from reuse of the workload's own content.
The figures are those llama-server reported for SmolLM2: 128 tokens of content become 158 prompt
tokens, and a request after the first is served 24 of them from cache."""
import pytest
from stackbook.measure.cache_split import COLD_WITHIN, construction_split, construction_tokens, workload_reuse
from stackbook.measure.prefix_cache import cache_counters
from tests.support.records import request_record


def _point(cached: list[int], server: int = 158, client: int = 128, **fields) -> list:
    return [request_record(request_index=i, prompt_tokens_client=client, prompt_tokens_server=server,
                           cached_prompt_tokens=c, **fields) for i, c in enumerate(cached)]


def test_the_template_head_every_request_shares_is_not_reuse():
    split = construction_split(_point([0, 24, 24, 25, 24, 24]))
    assert split == {"shared_head_tokens": 24, "workload_cached_tokens": 0, "workload_hit_rate": 0.0}


def test_a_prompt_served_again_from_cache_is_reuse_beyond_the_head():
    """Every arm in front of one server sent the same prompts: 157 of 158 tokens from cache, of
    which the 30 the template adds are the head's allowance and 127 of the 128 of content are reuse."""
    split = construction_split(_point([157] * 4))
    assert split["workload_cached_tokens"] == 4 * 127
    assert split["workload_hit_rate"] == pytest.approx(127 / 128, abs=1e-4) and split["workload_hit_rate"] > COLD_WITHIN


def test_the_salt_every_request_of_a_point_opens_with_is_part_of_the_head():
    """Salted prompts of one point share the template's 30 tokens and their salt (9 tokens, which
    the client counts into the content); with the salt's length given, nothing is reuse."""
    records = _point([0, 39, 39, 39], server=167, client=137)
    unsalted = construction_split(records)["workload_hit_rate"]
    assert unsalted == pytest.approx(3 * 9 / (4 * 137), abs=1e-4) and unsalted > COLD_WITHIN
    assert construction_split(records, shared_tokens=9) == {"shared_head_tokens": 39, "workload_cached_tokens": 0,
                                                            "workload_hit_rate": 0.0}


def test_a_group_prefix_the_workload_shares_is_reuse():
    """Prompts of one shared-prefix group: 251 tokens of the group's text past the template's 30."""
    split = construction_split(_point([281, 281], server=481, client=451))
    assert split["shared_head_tokens"] == 30 and split["workload_cached_tokens"] == 2 * 251
    assert split["workload_hit_rate"] == pytest.approx(251 / 451, abs=1e-4)


def test_sentinels_warm_up_and_failed_requests_are_not_the_workloads():
    records = _point([24, 24]) + [request_record(phase="sentinel", sentinel="arith", prompt_tokens_client=20,
                                                 prompt_tokens_server=50, cached_prompt_tokens=49),
                                  request_record(phase="warmup", prompt_tokens_client=128, prompt_tokens_server=158,
                                                 cached_prompt_tokens=157)]
    assert construction_split(records)["workload_cached_tokens"] == 0


def test_where_the_client_count_is_unknown_every_cached_token_is_reuse():
    """A request whose content the client could not count gives no head to allow for: the reading
    errs toward warm, never toward cold."""
    record = request_record(prompt_tokens_client=0, prompt_tokens_server=158, cached_prompt_tokens=24)
    assert construction_tokens(record) == 0
    assert construction_split([record])["workload_hit_rate"] == pytest.approx(24 / 158, abs=1e-4)


def test_the_engines_counters_are_told_apart_over_every_request_it_answered():
    """Counters count the warm-up too: 3 requests, each allowed its 30 template tokens (90 of 474
    queried); 72 hits are all inside the heads, 90 + 128 hits leave 128 of 384 as reuse."""
    records = _point([24, 24]) + [request_record(phase="warmup", prompt_tokens_client=128, prompt_tokens_server=158)]
    assert construction_split(records, engine_hits=72, engine_queries=474)["engine_workload_hit_rate"] == 0.0
    assert construction_split(records, engine_hits=218, engine_queries=474)["engine_workload_hit_rate"] == \
        pytest.approx(128 / 384, abs=1e-4)


def test_a_points_counters_carry_the_split():
    class Series:
        cache_hit_counters, cache_query_counters = ("hits_total",), ("queries_total",)

    out = cache_counters({"hits_total": 48.0, "queries_total": 316.0}, _point([0, 24]), Series())
    assert out["reported_hit_rate"] == round(24 / 316, 4) and out["workload_hit_rate"] == 0.0
    assert out["engine_workload_hit_rate"] == 0.0 and out["shared_head_tokens"] == 24
    assert workload_reuse(out) == 0.0 and workload_reuse({"reported_hit_rate": 0.15}) is None
