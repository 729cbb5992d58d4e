"""Agent traces as WEKA and AgentX record them: both subagent time conventions read to one
timeline (and a wrong one is refused naming the other), the sessions' structure (who starts a
subagent, who waits for it, the tool time kept), hash-id scope, the implied hit rate by the
formats' own definition per session depth, and a declared length scale that keeps the blocks."""
import json
import math

import pytest
from stackbook.loadgen.trace_fit import fitting_scale, scaled
from stackbook.loadgen.trace_formats import read_trace_file
from stackbook.loadgen.trace_records import Trace, TraceRequest
from stackbook.loadgen.trace_reuse import implied_hit_rates, implied_reuse
from stackbook.loadgen.trace_weka import mooncake_lines
from stackbook.locations import REPO_ROOT

EXAMPLES = REPO_ROOT / "campaigns" / "traces"


def weka():
    return read_trace_file(EXAMPLES / "example-weka.json", "weka", subagent_time="relative")


def agentx():
    return read_trace_file(EXAMPLES / "example-agentx.jsonl", "weka", subagent_time="absolute")


def test_both_time_conventions_read_the_same_session_onto_one_timeline():
    raw, absolute = weka(), agentx()
    assert raw.block_tokens == absolute.block_tokens == 64
    assert raw.requests == [r for r in absolute.requests if r.family == "session-0"]
    assert len(absolute.requests) == 20 and {r.family for r in absolute.requests} == {"session-0", "session-1"}


@pytest.mark.parametrize("name, wrong, says", [
    ("example-weka.json", "absolute", "before its spawn at t=4.889 s, so its times are relative to the spawn: set "
                                      "arrival.subagent_time: relative"),
    ("example-agentx.jsonl", "relative", "after this step at t=12.111 s that waits for it; the trace's subagent times "
                                         "are likely absolute: set arrival.subagent_time: absolute"),
])
def test_the_wrong_convention_is_refused_naming_the_right_one(name, wrong, says):
    with pytest.raises(ValueError) as err:
        read_trace_file(EXAMPLES / name, "weka", subagent_time=wrong)
    assert says in str(err.value), str(err.value)


def test_subagents_are_sessions_started_by_a_parent_step_and_waited_for_unless_in_the_background():
    reqs = weka().requests
    by = {(r.session, r.turn): r for r in reqs}
    doc = json.loads((EXAMPLES / "example-weka.json").read_text())["requests"]
    waited, background = doc[2], doc[4]
    assert (waited["type"], waited["status"], background["status"]) == ("subagent", "completed", "async_launched")
    first = by[("session-0/agent_1", 0)]
    assert first.spawned_by == ("session-0", 1) and first.depth == 1 and first.family == "session-0"
    # the parent's step after the waited-for subagent waits for it; the one after the background one does not
    assert by[("session-0", 2)].waits_for == ("session-0/agent_1",)
    assert by[("session-0/agent_2", 0)].spawned_by == ("session-0", 2) and by[("session-0", 3)].waits_for == ()
    # tool time: from the end of what a step waits on (its start plus its recorded api_time) to the step
    prev, step = by[("session-0", 0)], by[("session-0", 1)]
    assert step.gap_s == pytest.approx(step.timestamp_s - (prev.timestamp_s + prev.api_time_s), abs=1e-6)
    spawner = by[("session-0", 1)]
    assert first.gap_s == pytest.approx(first.timestamp_s - (spawner.timestamp_s + spawner.api_time_s), abs=1e-6)
    join, sub_end = by[("session-0", 2)], waited["t"] + waited["duration_ms"] / 1000
    assert join.gap_s == pytest.approx(join.timestamp_s - sub_end, abs=1e-3)
    assert by[("session-0", 0)].gap_s is None  # a session's first step keeps its recorded time


def test_local_hash_ids_are_one_namespace_a_trace():
    reqs = agentx().requests
    ids = {f: {h for r in reqs if r.family == f for h in r.hash_ids} for f in ("session-0", "session-1")}
    raw = [json.loads(x) for x in (EXAMPLES / "example-agentx.jsonl").read_text().splitlines()]
    assert raw[0]["requests"][0]["hash_ids"][0] == raw[1]["requests"][0]["hash_ids"][0] == 1  # same numbers ...
    assert not ids["session-0"] & ids["session-1"]  # ... different blocks


def test_a_malformed_trace_is_refused_with_its_field(tmp_path):
    doc = {"id": "x", "block_size": 64, "hash_id_scope": "local",
           "requests": [{"t": 0, "type": "n", "in": 130, "out": 4, "hash_ids": [1, 2]}]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"requests.0: 2 block ids for 130 prompt tokens; 64-token blocks need 3"):
        read_trace_file(path, "weka")
    doc["hash_id_scope"] = "team"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"the trace, field hash_id_scope: Input should be 'local' or 'global'"):
        read_trace_file(path, "weka")


def test_the_implied_hit_rate_by_hand():
    """block size 4. Root a: [1,2,3] (10 tokens) all new; [1,2,3,4] (14): 3 seen, 12 tokens;
    subagent b: [1,2,9] (9): 2 seen, 8 tokens; [5,2] (8): first block new, so none (a prefix cache
    reuses prefixes). Tokens: (0 + 12 + 8 + 0) / (10 + 14 + 9 + 8) = 20/41. AIPerf analyze-trace:
    mean of seen leading blocks over blocks = (0 + 3/4 + 2/3 + 0) / 4. Depth 0: 12/24 and 3/8;
    depth 1: 8/17 and 1/3."""
    reqs = [TraceRequest(0, 10, 1, (1, 2, 3), session="a"), TraceRequest(1, 14, 1, (1, 2, 3, 4), session="a", turn=1),
            TraceRequest(2, 9, 1, (1, 2, 9), session="a/b", depth=1),
            TraceRequest(3, 8, 1, (5, 2), session="a/b", turn=1, depth=1)]
    r = implied_hit_rates(reqs, 4)
    assert r["hit_rate"] == pytest.approx(20 / 41) and r["cached_tokens"] == 20 and r["prompt_tokens"] == 41
    assert r["mean_hit_rate"] == pytest.approx((3 / 4 + 2 / 3) / 4)
    assert r["by_depth"][0]["hit_rate"] == pytest.approx(12 / 24) and r["by_depth"][0]["mean_hit_rate"] == 3 / 8
    assert r["by_depth"][1]["hit_rate"] == pytest.approx(8 / 17) and r["by_depth"][1]["mean_hit_rate"] == pytest.approx(
        1 / 3
    )


def test_the_mooncake_conversion_implies_the_same_reuse_at_the_same_block_size(tmp_path):
    trace = agentx()
    path = tmp_path / "m.jsonl"
    path.write_text(mooncake_lines(trace))
    lines = read_trace_file(path, "mooncake", block_tokens=64)
    assert [r.session for r in lines.requests] == [r.session for r in trace.requests]
    ours, theirs = implied_reuse(trace), implied_reuse(lines)
    assert theirs["hit_rate"] == ours["hit_rate"] and theirs["mean_hit_rate"] == ours["mean_hit_rate"]
    with pytest.raises(ValueError, match="64-token blocks need|512-token blocks need"):
        read_trace_file(path, "mooncake")  # read at Mooncake's own 512, its ids do not fit: refused, not guessed


def test_a_length_scale_keeps_every_request_s_blocks():
    trace = weka()
    half = scaled(trace, 0.5)
    assert half.block_tokens == 32
    for a, b in zip(trace.requests, half.requests):
        assert b.hash_ids == a.hash_ids and len(b.hash_ids) == math.ceil(b.prompt_tokens / 32)
        assert b.prompt_tokens == math.ceil(a.prompt_tokens / 2) and b.timestamp_s == a.timestamp_s
    assert implied_reuse(half)["mean_hit_rate"] == implied_reuse(trace)["mean_hit_rate"]
    assert fitting_scale(trace, 2048) == 46 / 64  # the largest whole-block scale under which all fit
    with pytest.raises(ValueError, match="blocks 19.2 tokens; a scale must give whole blocks of at least 8"):
        scaled(trace, 0.3)
    plain = Trace("stackbook", [TraceRequest(0, 3000, 100)])
    assert fitting_scale(plain, 2048) == 0.66 and scaled(plain, 0.5).requests[0].prompt_tokens == 1500


def test_the_docs_quote_the_agentx_example_s_implied_rates():
    import re
    text = " ".join((REPO_ROOT / "docs" / "campaigns.md").read_text().split())
    quoted = re.search(r"`example-agentx\.jsonl` implies (\d+)% \(`hit_rate`\), (\d+)% \(`mean_hit_rate`\)", text)
    r = implied_reuse(agentx())
    assert quoted and (int(quoted.group(1)), int(quoted.group(2))) == (round(100 * r["hit_rate"]),
                                                                      round(100 * r["mean_hit_rate"]))


def _tokenizers():
    from stackbook.loadgen.workload import ApproximateTokenizer, client_tokenizer
    from stackbook.model.artifacts import embedded_artifacts

    hf = embedded_artifacts().hf_dir
    return [ApproximateTokenizer()] + ([client_tokenizer(str(hf))] if (hf / "tokenizer.json").exists() else [])


@pytest.mark.parametrize("tokenizer", _tokenizers(), ids=lambda t: type(t).__name__)
def test_prompts_of_a_scaled_agent_trace_share_text_where_its_steps_share_blocks(tokenizer):
    """At length_scale 0.5 (32-token blocks, partial last blocks often shorter than the instruction
    the workload adds, which is then taken from the blocks before it): each step's prompt opens with
    the text of the blocks it shares with an earlier step, a subagent's with its parent's tools
    blocks, and its length is the scaled trace's within the tokenizer's joins."""
    from stackbook.config.protocol import SyntheticWorkload
    from stackbook.loadgen.workload import synthetic_prompts

    trace = scaled(agentx(), 0.5)
    reqs = trace.requests
    prompts = synthetic_prompts(SyntheticWorkload(prompt_tokens=64, output_tokens=8), tokenizer, len(reqs), seed=0,
                                lengths=[(r.prompt_tokens, r.output_tokens) for r in reqs],
                                blocks=(32, [r.hash_ids for r in reqs]))
    ids = [tokenizer.encode(p.messages[-1]["content"], add_special_tokens=False).ids for p in prompts]
    for i, a in enumerate(reqs):
        for j, b in enumerate(reqs[:i]):
            shared = 0
            while shared < min(len(a.hash_ids), len(b.hash_ids)) - 2 and a.hash_ids[shared] == b.hash_ids[shared]:
                shared += 1  # whole leading blocks in common, short of the two the instruction may shorten
            if shared:
                common = next(
                    (k for k, (x, y) in enumerate(zip(ids[i], ids[j])) if x != y), min(len(ids[i]), len(ids[j]))
                )
                # a block's text can end inside a word that the next block's text re-joins: a token a boundary
                assert common >= shared * 32 - shared - 1, (i, j, shared, common)
    assert any(r.depth == 1 and r.hash_ids[:3] == reqs[0].hash_ids[:3] for r in reqs)  # tools blocks shared
    # each join between two blocks' texts may merge a token: up to one a block short, never long
    assert all(-len(r.hash_ids) - 8 <= len(x) - r.prompt_tokens <= 8 for x, r in zip(ids, reqs))
