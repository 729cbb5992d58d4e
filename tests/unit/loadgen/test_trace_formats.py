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
    assert (EXAMPLES / name).read_bytes() == made[name], "regenerate: python -c 'from stackbook.loadgen.trace_examples import write_examples; write_examples()'"
    trace = read_trace_file(EXAMPLES / name, trace_examples.FORMAT_OF[name])
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


@pytest.mark.parametrize("fmt, text, line, where", [
    ("stackbook", '{"timestamp_s": 0, "prompt_tokens": 10, "output_tokens": 4}\n{"timestamp_s": 1, "prompt_tokens": 10}\n',
     2, "field output_tokens: Field required"),
    ("stackbook", '{"timestamp_s": 0, "prompt_tokens": 10, "output_tokens": 4}\n{"timestamp_s": 1,\n', 2, "not JSON"),
    ("azure", "TIMESTAMP,ContextTokens,GeneratedTokens\n2026-12-01 09:00:00.1,12,3\n2026-12-01 09:00:01.2,twelve,3\n",
     3, "field ContextTokens: Input should be a valid integer"),
    ("burstgpt", "Timestamp,Model,Request tokens,Response tokens\n1.5,ChatGPT,-3,4\n", 2,
     "field Request tokens: Input should be greater than or equal to 0"),
    ("mooncake", '{"timestamp": 10, "input_length": 1100, "output_length": 4, "hash_ids": [1, 2]}\n', 1,
     "field hash_ids: Value error, 2 block ids for 1100 prompt tokens; 512-token blocks need 3"),
])
def test_a_malformed_row_is_refused_with_its_line_and_field(tmp_path, fmt, text, line, where):
    path = tmp_path / ("t.csv" if fmt in ("azure", "burstgpt") else "t.jsonl")
    path.write_text(text)
    with pytest.raises(ValueError) as err:
        read_trace_file(path, fmt)
    assert f"line {line}" in str(err.value) and where in str(err.value), str(err.value)


def test_an_unknown_format_names_the_known_ones(tmp_path):
    with pytest.raises(ValueError, match=r"trace format 'sharegpt' is not known; known formats: \['azure', "):
        read_trace_file(EXAMPLES / "example-stackbook.jsonl", "sharegpt")


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
                common = next((k for k, (x, y) in enumerate(zip(ids[i], ids[j])) if x != y), min(len(ids[i]), len(ids[j])))
                assert common >= shared * 512 - 1, (i, j, shared, common)
    assert all(abs(count_tokens(tokenizer, t) - r.prompt_tokens) <= 0.02 * r.prompt_tokens + 8
               for t, r in zip(texts, reqs))
    assert texts[0] != texts[1]  # different sessions' own blocks differ
