"""The reuse a shared-prefix workload implies under a cold protocol, by hand; and arms that realize
different shares of it (replicas routed differently) stay comparable: the realized share beside the
implied one is what such a campaign measures."""
from stackbook.analysis.cache_fairness import realized_cache, same_realized_cache
from stackbook.config.loading import parse_campaign
from stackbook.evidence.rundir import ArmDir
from stackbook.loadgen.records import RecordWriter
from stackbook.measure.prefix_cache import cache_counters
from stackbook.measure.shared_prefix_reuse import implied_shared_prefix, reported_hit_rate

from tests.support.records import request_record
from tests.unit.analysis.test_fairness import CAMPAIGN, observed

# In sending order; 150 prompt tokens each: 126 of content (100 the group's prefix), 24 of template.
GROUPS = [0, 0, 1, 0, 1]


def records(cached: list[int]) -> list:
    return [request_record(request_index=i, sent_s=i, prefix_group=g, prompt_tokens_server=150,
                           prompt_tokens_client=126, cached_prompt_tokens=c)
            for i, (g, c) in enumerate(zip(GROUPS, cached))]


def test_each_request_after_its_groups_first_reuses_the_prefix():
    recs = records([0, 100, 0, 100, 0])
    assert implied_shared_prefix(recs, 100) == 0.4  # 300 of 750 prompt tokens: the 2nd, 4th and 5th
    assert reported_hit_rate(recs) == round(200 / 750, 4)


class NoCounters:
    cache_hit_counters = cache_query_counters = ()


def arm(tmp_path, name: str, cached: list[int]) -> dict:
    a = observed()
    folder = ArmDir(tmp_path / name, name).create()
    with RecordWriter(folder.requests) as w:
        for r in records(cached):
            w.write(r)
    a["dir"] = folder
    a["results"]["sweep"]["points"] = {"c1-r0": a["results"]["sweep"]["points"]["c1-r0"]}
    a["results"]["sweep"]["points"]["c1-r0"]["prefix_cache"] = {"state": "cold"} | cache_counters(
        {}, records(cached), NoCounters())
    return a


def test_arms_realizing_different_reuse_of_a_cold_shared_prefix_workload_stay_comparable(tmp_path):
    protocol = parse_campaign({**CAMPAIGN, "protocol": {**CAMPAIGN["protocol"], "prefix_cache": "cold",
                               "workload": {"kind": "synthetic", "prompt_tokens": 150, "output_tokens": 16,
                                            "shared_prefix": {"groups": 2, "tokens": 100}}}}).protocol
    # after the first request every reply is served the 24-token template head; a reused prefix adds 100
    sticky = realized_cache(arm(tmp_path, "sticky", [0, 124, 24, 124, 124]), protocol)
    spread = realized_cache(arm(tmp_path, "spread", [0, 24, 24, 124, 24]), protocol)
    assert sticky["implied_hit_rate"] == spread["implied_hit_rate"] == 0.4
    assert sticky["per_point"]["c1-r0"]["workload"] != spread["per_point"]["c1-r0"]["workload"]
    assert sticky["realized"] == "warm" and same_realized_cache(sticky, spread)
    del sticky["implied_hit_rate"], spread["implied_hit_rate"]  # as a warm protocol's arms would be judged
    assert not same_realized_cache(sticky, spread)
