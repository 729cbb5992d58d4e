"""A replayed agent trace in a campaign: what it states of the file (the subagent time
convention, a Mooncake block size) is checked against its format, a trace longer than the context
is refused naming the fields that would fit it (the scale that would), and a declared length scale
is applied and recorded, never a silent cut."""
import pytest
from pydantic import ValidationError
from stackbook.config.protocol import Protocol
from stackbook.locations import REPO_ROOT

AGENTX = str(REPO_ROOT / "campaigns/traces/example-agentx.jsonl")


def protocol(arrival, **kw):
    return Protocol(arrival=arrival, workload={"kind": "synthetic", "prompt_tokens": 32, "output_tokens": 8}, **kw)


def test_a_trace_over_the_context_is_refused_naming_the_scale_that_would_fit():
    with pytest.raises(ValidationError) as err:
        protocol({"kind": "trace", "path": AGENTX, "format": "weka"}, context_length=2048)
    text = str(err.value)
    assert "session-1 (row 13) needs 2313 tokens, prompt and reply, but context_length is 2048, and 3 more" in text, (
        text
    )
    assert "set arrival.length_scale: 0.703125 (the largest scale that fits" in text
    assert "64-token blocks becoming 45" in text and "arrival.fit: drop" in text and "never cut short" in text


def test_a_declared_scale_fits_and_is_recorded():
    p = protocol({"kind": "trace", "path": AGENTX, "format": "weka", "length_scale": 0.5, "order": "session"},
                 context_length=2048)
    a = p.arrival
    assert a.longest_request_tokens() == 1434 and a.trace().block_tokens == 32
    assert a.evidence()["length_scale"] == {"scale": 0.5, "block_tokens": [64, 32],
                                            "longest_request_tokens": [2866, 1434]}
    plan = a.point_plan(a.load_levels()[0], 20, 0, 0)
    assert plan.spawned_by.count(None) == 16 and sum(1 for w in plan.waits_for if w) == 2
    assert a.implied_reuse()["by_depth"][1]["requests"] == 10
    links = a.session_links()
    assert len(links) == 20 and ("session-0", 1) in [p for p, _ in links]


@pytest.mark.parametrize(
    "arrival, says",
    [
        ({"format": "weka", "length_scale": 0.3}, "a scale must give whole blocks of at least 8 tokens"),
        ({"format": "weka", "block_tokens": 64}, "block_tokens states the block size of Mooncake-style lines"),
        (
            {
                "format": "mooncake",
                "subagent_time": "relative",
                "path": str(REPO_ROOT / "campaigns/traces/example-mooncake.jsonl"),
            },
            "subagent_time reads weka agent traces",
        ),
        (
            {"format": "openai", "length_scale": 0.5, "path": str(REPO_ROOT / "campaigns/traces/example-openai.jsonl")},
            "replays recorded text, which cannot be scaled",
        ),
        (
            {"format": "weka", "subagent_time": "relative", "length_scale": 0.5},
            "the trace's subagent times are likely absolute: set arrival.subagent_time: absolute",
        ),
    ],
)
def test_what_a_campaign_states_of_a_trace_is_checked(arrival, says):
    with pytest.raises((ValidationError, ValueError)) as err:
        protocol({"kind": "trace", "path": AGENTX, **arrival}, context_length=4096)
    assert says in str(err.value), str(err.value)


def test_a_point_of_an_agent_trace_records_the_implied_rate_per_depth():
    from stackbook.measure.sweep_point import point_figures
    from tests.support.records import request_record

    p = protocol({"kind": "trace", "path": AGENTX, "format": "weka", "length_scale": 0.5, "order": "session"},
                 context_length=2048)
    load = p.arrival.loads()[0]
    implied = p.arrival.implied_reuse()
    depth_of = implied["depth_of"]
    # replies at depth 0 reported a quarter of their prompt cached, at depth 1 three quarters
    records = [request_record(request_index=i, sent_s=i, end_s=i + 0.5, prompt_tokens_server=100,
                              cached_prompt_tokens=75 if depth_of[i] else 25) for i in range(20)]
    s = point_figures(p, load, 0, records, readings=None, earlier={"prefix_cache": {"policy": "x"}}, sentinels=[],
                      sent={}, trace_lengths=None, implied=implied)
    pc = s["prefix_cache"]
    assert pc["implied_hit_rate"] == implied["hit_rate"] and pc["implied_mean_hit_rate"] == implied["mean_hit_rate"]
    assert pc["implied_by_depth"]["1"] == {
        k: implied["by_depth"][1][k] for k in ("requests", "hit_rate", "mean_hit_rate")
    } | {"reported_hit_rate": 0.75}
    assert pc["implied_by_depth"]["0"]["reported_hit_rate"] == 0.25 and depth_of.count(1) == 10
    assert s["session_order"]["subagents"] == 4
