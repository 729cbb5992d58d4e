"""Traces in the formats people have: each committed example reads, a malformed row is refused
with its line and field, the examples can be made again byte for byte, and the prefix reuse a
block-hashed trace implies is counted as a prefix cache would find it."""
import json

import pytest
from stackbook.loadgen import trace_examples
from stackbook.loadgen.trace_formats import Trace, TraceRequest, implied_reuse, read_trace_file
from stackbook.locations import REPO_ROOT

EXAMPLES = REPO_ROOT / "campaigns" / "traces"


@pytest.mark.parametrize("name", sorted(trace_examples.EXAMPLES))
def test_each_committed_example_reads_and_is_made_again_byte_for_byte(name, tmp_path):
    made = {p.name: p.read_bytes() for p in trace_examples.write_examples(tmp_path)}
    assert (EXAMPLES / name).read_bytes() == made[name], (
        "regenerate: python -c 'from stackbook.loadgen.trace_examples import write_examples; write_examples()'"
    )
    trace = read_trace_file(EXAMPLES / name, trace_examples.FORMAT_OF[name], **trace_examples.OPTIONS_OF.get(name, {}))
    assert trace.requests[0].timestamp_s == 0
    assert [r.timestamp_s for r in trace.requests] == sorted(r.timestamp_s for r in trace.requests)
    assert all(r.prompt_tokens >= 1 and r.output_tokens >= 1 for r in trace.requests)


def test_the_chat_examples_hold_the_same_requests_in_every_format():
    plain = read_trace_file(EXAMPLES / "example-stackbook.jsonl").requests
    azure = read_trace_file(EXAMPLES / "example-azure.csv", "azure").requests
    burst = read_trace_file(EXAMPLES / "example-burstgpt.csv", "burstgpt")
    assert azure == plain
    assert burst.left_out == {"failed in the trace (no reply)": 1} and len(burst.requests) == len(plain) - 1
    assert burst.requests == [r for i, r in enumerate(plain) if i != 5]


@pytest.mark.parametrize(
    "fmt, text, line, where",
    [
        (
            "stackbook",
            '{"timestamp_s": 0, "prompt_tokens": 10, "output_tokens": 4}\n{"timestamp_s": 1, "prompt_tokens": 10}\n',
            2,
            "field output_tokens: Field required",
        ),
        (
            "stackbook",
            '{"timestamp_s": 0, "prompt_tokens": 10, "output_tokens": 4}\n{"timestamp_s": 1,\n',
            2,
            "not JSON",
        ),
        (
            "azure",
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2026-12-01 09:00:00.1,12,3\n2026-12-01 09:00:01.2,twelve,3\n",
            3,
            "field ContextTokens: Input should be a valid integer",
        ),
        (
            "burstgpt",
            "Timestamp,Model,Request tokens,Response tokens\n1.5,ChatGPT,-3,4\n",
            2,
            "field Request tokens: Input should be greater than or equal to 0",
        ),
        (
            "mooncake",
            '{"timestamp": 10, "input_length": 1100, "output_length": 4, "hash_ids": [1, 2]}\n',
            1,
            "field hash_ids: Value error, 2 block ids for 1100 prompt tokens; 512-token blocks need 3",
        ),
        (
            "openai",
            '{"timestamp": 1.0, "body": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}}\n'
            '{"timestamp": 2.0, "body": {"messages": [{"role": "robot", "content": "hi"}], "max_tokens": 8}}\n',
            2,
            "field body.messages.0.role: Input should be 'system', 'developer', 'user', 'assistant' or 'tool'",
        ),
        (
            "openai",
            '{"timestamp": 1.0, "body": {"messages": [{"role": "user", "content": "hi"}]}}\n',
            1,
            "no reply length: give body.max_tokens",
        ),
        (
            "sharegpt",
            '[{"id": "a", "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]},'
            ' {"id": "b", "conversations": [{"from": "human"}]}]',
            2,
            "field conversations.0.value: Field required",
        ),
    ],
)
def test_a_malformed_row_is_refused_with_its_line_and_field(tmp_path, fmt, text, line, where):
    path = tmp_path / ("t.csv" if fmt in ("azure", "burstgpt") else "t.json" if fmt == "sharegpt" else "t.jsonl")
    path.write_text(text)
    with pytest.raises(ValueError) as err:
        read_trace_file(path, fmt)
    assert f"line {line}" in str(err.value) and where in str(err.value), str(err.value)


def test_an_unknown_format_names_the_known_ones(tmp_path):
    with pytest.raises(ValueError, match=r"trace format 'lmsys' is not known; known formats: \['azure', "):
        read_trace_file(EXAMPLES / "example-stackbook.jsonl", "lmsys")


def test_implied_reuse_counts_leading_blocks_seen_before_as_a_prefix_cache_would():
    reqs = [TraceRequest(0, 1100, 4, (1, 2, 3)),      # all new
            TraceRequest(1, 1200, 4, (1, 2, 9)),      # 1024 tokens of blocks 1, 2 cached; 9 new
            TraceRequest(2, 600, 4, (7, 2)),          # block 2 seen, but after a new first block: not a prefix
            TraceRequest(3, 300, 4, (1,))]            # a partial block: 300 tokens of block 1
    r = implied_reuse(Trace("mooncake", reqs, 512))
    assert r["cached_tokens"] == 1024 + 300 and r["prompt_tokens"] == 3200
    assert r["hit_rate"] == pytest.approx(1324 / 3200) and r["distinct_blocks"] == 5
    assert implied_reuse(Trace("stackbook", reqs[:1], None)) is None


def test_the_agentic_example_implies_the_reuse_of_its_shared_system_block_and_growing_sessions():
    trace = read_trace_file(EXAMPLES / "example-mooncake.jsonl", "mooncake")
    r = implied_reuse(trace)
    assert r["block_tokens"] == 512 and r["blocks"] == 36 and r["distinct_blocks"] == 21
    assert r["hit_rate"] == pytest.approx(7680 / 14789)
    rows = [json.loads(x) for x in (EXAMPLES / "example-mooncake.jsonl").read_text().splitlines()]
    assert max(x["input_length"] for x in rows) < 2048 and all(x["hash_ids"][0] == 0 for x in rows)


def _tokenizers():
    from stackbook.loadgen.workload import ApproximateTokenizer, client_tokenizer
    from stackbook.model.artifacts import embedded_artifacts

    toks = [ApproximateTokenizer()]
    hf = embedded_artifacts().hf_dir
    if (hf / "tokenizer.json").exists():  # the embedded model's own, where make test set it up
        toks.append(client_tokenizer(str(hf)))
    return toks


@pytest.mark.parametrize("tokenizer", _tokenizers(), ids=lambda t: type(t).__name__)
def test_prompts_from_a_block_hashed_trace_share_text_where_they_share_leading_blocks(tokenizer):
    """The agentic example's steps re-send their session's blocks: each prompt's text opens with
    the text of every earlier prompt's shared leading blocks, token for token, and its length is
    the trace's within the tokenizer's joins."""
    from stackbook.config.protocol import SyntheticWorkload
    from stackbook.loadgen.workload import count_tokens, synthetic_prompts

    trace = read_trace_file(EXAMPLES / "example-mooncake.jsonl", "mooncake")
    reqs = trace.requests
    prompts = synthetic_prompts(SyntheticWorkload(prompt_tokens=64, output_tokens=8), tokenizer, len(reqs), seed=0,
                                lengths=[(r.prompt_tokens, r.output_tokens) for r in reqs],
                                blocks=(512, [r.hash_ids for r in reqs]))
    texts = [p.messages[-1]["content"] for p in prompts]
    ids = [tokenizer.encode(t, add_special_tokens=False).ids for t in texts]
    for i, a in enumerate(reqs):
        for j, b in enumerate(reqs[:i]):
            shared = 0
            while shared < min(len(a.hash_ids), len(b.hash_ids)) - 1 and a.hash_ids[shared] == b.hash_ids[shared]:
                shared += 1  # full leading blocks in common (a last block is partial, its own)
            if shared:
                common = next(
                    (k for k, (x, y) in enumerate(zip(ids[i], ids[j])) if x != y), min(len(ids[i]), len(ids[j]))
                )
                assert common >= shared * 512 - 1, (i, j, shared, common)
    assert all(abs(count_tokens(tokenizer, t) - r.prompt_tokens) <= 0.02 * r.prompt_tokens + 8
               for t, r in zip(texts, reqs))
    assert texts[0] != texts[1]  # different sessions' own blocks differ


def test_a_logged_agent_session_keeps_its_content_its_sessions_in_order_and_its_reuse():
    """The OpenAI-style log: 4 agent sessions of 3 steps, each step re-sending the shared system
    prompt and the session so far. Its requests keep their messages, their sessions' turns count
    up in arrival order, and the reuse it implies (55%) comes from the system prompt and each
    session's growing context, measured in 64-token blocks of the recorded text."""
    trace = read_trace_file(EXAMPLES / "example-openai.jsonl", "openai")
    assert len(trace.requests) == 12 and trace.has_content and trace.block_tokens == 64
    by_session: dict[str, list] = {}
    for r in trace.requests:
        by_session.setdefault(r.session, []).append(r)
    assert sorted(by_session) == ["agent-0", "agent-1", "agent-2", "agent-3"]
    for steps in by_session.values():
        assert [r.turn for r in steps] == [0, 1, 2]
        # each step carries the one before it, and its reply, as its prefix
        assert [len(r.messages) for r in steps] == [2, 4, 6]
        assert steps[1].messages[:2] == steps[0].messages and steps[1].messages[2]["role"] == "assistant"
        assert steps[2].hash_ids[:len(steps[1].hash_ids) - 1] == steps[1].hash_ids[:-1]
    assert all(r.messages[0]["role"] == "system" for r in trace.requests)
    assert [r.output_tokens for r in by_session["agent-0"]] == [28, 25, 27]  # the log's usage counts
    reuse = implied_reuse(trace)
    assert reuse["hit_rate"] == pytest.approx(1344 / 2442) and reuse["distinct_blocks"] == 24


def test_sharegpt_conversations_are_one_request_per_answered_human_turn_in_file_order():
    trace = read_trace_file(EXAMPLES / "example-sharegpt.json", "sharegpt")
    assert [r.timestamp_s for r in trace.requests] == [float(i) for i in range(len(trace.requests))]
    first = [r for r in trace.requests if r.session == "conv-0"]
    assert [r.turn for r in first] == list(range(len(first))) and len(first) >= 2
    assert first[1].messages[:2] == first[0].messages + (first[1].messages[1],)
    assert [m["role"] for m in first[1].messages] == ["user", "assistant", "user"]
    # A conversation whose last human turn has no reply records no request for that turn.
    assert implied_reuse(trace)["hit_rate"] > 0


def test_a_conversation_with_no_answered_turn_is_left_out_and_counted(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text('{"id": 1, "conversations": [{"from": "human", "value": "alone"}]}\n'
                    '{"id": 2, "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}\n')
    trace = read_trace_file(path, "sharegpt")
    assert len(trace.requests) == 1 and trace.requests[0].session == "2"
    assert trace.left_out == {"no human turn with a recorded reply": 1}


def test_the_implied_reuse_docs_quote_for_each_example_is_the_examples():
    """docs/campaigns.md quotes each example's implied reuse; each quote is recomputed here."""
    import re
    text = " ".join((REPO_ROOT / "docs" / "campaigns.md").read_text().split())
    for name, fmt, pattern in (("example-mooncake.jsonl", "mooncake", r"(\d+)% for `example-mooncake\.jsonl`"),
                               ("example-openai.jsonl", "openai", r"example-openai\.jsonl` .*? is (\d+)%"),
                               ("example-sharegpt.json", "sharegpt", r"of `example-sharegpt\.json` (\d+)%")):
        quoted = re.search(pattern, text)
        assert quoted, f"docs/campaigns.md no longer quotes {name}'s implied reuse"
        assert int(quoted.group(1)) == round(100 * implied_reuse(read_trace_file(EXAMPLES / name, fmt))["hit_rate"])
