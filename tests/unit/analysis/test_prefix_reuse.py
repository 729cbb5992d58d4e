"""The reuse a workload implies beside what each engine realized, with the finding in words."""
import pandas as pd
from stackbook.analysis.prefix_reuse import depth_table, finding, reuse_table


def arm(**pc):
    return {"results": {"sweep": {"points": {"trace-r0": {"prefix_cache": {"state": "cold", **pc}}}}}}


def test_each_arm_beside_the_implied_rate_and_the_finding():
    t = reuse_table({"llama-cpp": arm(implied_hit_rate=0.55, reported_hit_rate=0.21),
                     "vllm-cpu": arm(implied_hit_rate=0.55, engine_hit_rate=0.52, reported_hit_rate=0.0)})
    assert t.loc[("vllm-cpu", "trace-r0"), "finding"] == "realized: 52% of prompt tokens from cache against 55% implied"
    assert t.loc[("llama-cpp", "trace-r0"), "finding"].startswith("not realized: 21% from cache against 55% implied, "
                                                                   "34 points short")
    assert pd.isna(t.loc[("llama-cpp", "trace-r0"), "engine counters"])


def test_nothing_where_no_workload_implies_reuse():
    assert reuse_table({"a": arm(engine_hit_rate=0.1)}) is None and reuse_table({}) is None
    assert finding(0.5, None).startswith("not observed")


def test_a_shortfall_names_the_engines_own_cache_policy():
    a = arm(implied_hit_rate=0.55, engine_hit_rate=0.2)
    a["results"]["sweep"]["prefix_cache"] = {"state": "cold", "policy": "hashed KV blocks of 128 tokens"}
    t = reuse_table({"vllm-cpu": a})
    assert t.loc[("vllm-cpu", "trace-r0"), "finding"] == ("not realized: 20% from cache against 55% implied, 35 points "
                                                          "short (its cache: hashed KV blocks of 128 tokens)")


def test_an_agent_trace_shows_each_session_depth_beside_what_its_replies_reported():
    by_depth = {"0": {"requests": 10, "hit_rate": 0.68, "mean_hit_rate": 0.58, "reported_hit_rate": 0.61},
                "1": {"requests": 10, "hit_rate": 0.60, "mean_hit_rate": 0.55, "reported_hit_rate": None}}
    t = depth_table({"vllm-cpu": arm(implied_hit_rate=0.66, implied_by_depth=by_depth)})
    assert list(t.index) == [("vllm-cpu", "trace-r0", 0), ("vllm-cpu", "trace-r0", 1)]
    assert t.loc[("vllm-cpu", "trace-r0", 0), "replies reported"] == 0.61
    assert pd.isna(t.loc[("vllm-cpu", "trace-r0", 1), "replies reported"])
    assert depth_table({"a": arm(implied_hit_rate=0.5)}) is None
