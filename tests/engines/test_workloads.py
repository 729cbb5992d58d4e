"""Workload shapes end to end on a real engine (llama-server, embedded model): drawn lengths,
shared-prefix groups under a warm cache, multi-turn conversations, JSON-schema replies checked on
arrival, and the cold-cache flush recorded per point."""
import json
import shutil

import pytest
from stackbook.loadgen.records import read_records
from stackbook.runner import run_campaign

pytestmark = pytest.mark.engine

SHAPES = """
name: e2e-workloads
model: {source: embedded}
protocol:
  stages: [sweep]
  decoding: {preset: greedy}
  workload:
    kind: synthetic
    prompt_tokens: {kind: lognormal, median: 70, sigma: 0.3, min: 50, max: 120}
    output_tokens: {kind: uniform, min: 4, max: 12}
    shared_prefix: {groups: 2, tokens: 32}
    conversation: {turns: 2}
  arrival: {kind: poisson, rates: [3]}
  prefix_cache: warm
  context_length: 1024
  requests_per_point: 6
  repetitions: 1
  warmup_requests: 1
  canaries: {run_sweep_on_hold: true}
arms:
  - name: llama
    engine: {kind: llama_cpp, parallel: 2}
"""

JSON_REPLIES = """
name: e2e-json
model: {source: embedded}
protocol:
  stages: [sweep]
  workload: {kind: synthetic, prompt_tokens: 40, output_tokens: %d, response_format: json_schema}
  arrival: {kind: closed_loop, concurrency: [1]}   # the schema is checked, not the load
  prefix_cache: cold
  context_length: 512
  requests_per_point: 4
  repetitions: 1
  warmup_requests: 0
  discard_rules: {max_failed_fraction: 1.0}
  canaries: {run_sweep_on_hold: true}
arms:
  - name: llama
    engine: {kind: llama_cpp, parallel: 2}
"""


def run(tmp_path, text, name):
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return run_campaign(str(path), run_id=f"test-{tmp_path.name}", progress=False)


def test_lengths_prefixes_conversations_and_a_warm_cache(real_engines, tmp_path):
    run_dir = run(tmp_path, SHAPES, "shapes")
    try:
        arm = run_dir.arm("llama")
        recs = [r for r in read_records(arm.requests) if r.phase != "sentinel"]
        # 1 warm-up + 6 measured + 1 cool-down conversations, two turns each (sentinels apart)
        assert len(recs) == 16 and all(r.ok for r in recs), [r.error for r in recs if not r.ok]
        first = [r for r in recs if r.turn == 0]
        second = {r.conversation: r for r in recs if r.turn == 1}
        assert len(first) == 8 and len(second) == 8
        for r in first:
            # drawn lengths, each honoured (ignore_eos) and recorded per request
            assert 4 <= r.output_tokens_requested <= 12 and r.output_tokens_server == r.output_tokens_requested
            assert r.prefix_group in (0, 1)
            later = second[r.conversation]
            # the second turn carries the first one's reply: the engine saw a longer prompt
            assert later.prompt_tokens_server > r.prompt_tokens_server + r.output_tokens_server
            assert later.sent_s >= r.end_s
        assert len({r.output_tokens_requested for r in recs}) > 2
        sweep = json.loads(arm.results.read_text())["sweep"]
        cache = sweep["prefix_cache"]["points"]["rate3-r0"]
        assert cache["state"] == "warm" and cache["flush"].startswith("erased")
        assert cache["primed_requests"] == 2
        # every prompt opens with a primed prefix: the engine reports cached prompt tokens
        assert cache["reported_cached_prompt_tokens"] > 8 * 32 * 0.5
        passport = json.loads(arm.passport_json.read_text())
        assert passport["validity"]["prefix_cache"]["state"] == "warm"
        assert passport["validity"]["gpu_telemetry"]["nvml"] == "absent"
        assert passport["protocol"]["prompt_tokens"].startswith("lognormal median 70")
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


@pytest.mark.parametrize("budget, expect", [(64, "none"), (4, "length_truncated")])
def test_json_replies_are_checked_against_the_schema(real_engines, tmp_path, budget, expect):
    """With room to close the object the engine's grammar gives valid JSON; cut at 4 tokens the
    reply hit its token limit before the object closed: length truncation, not a schema failure
    and not a success."""
    run_dir = run(tmp_path, JSON_REPLIES % budget, f"json{budget}")
    try:
        arm = run_dir.arm("llama")
        recs = [r for r in read_records(arm.requests) if r.phase == "measure"]
        assert len(recs) == 4 and {r.error_class for r in recs} == {expect}, [r.error for r in recs]
        assert all(not r.length_controlled for r in recs)
        if expect == "none":
            assert all(set(json.loads(r.output_text)) == {"words", "count"} for r in recs)
        sweep = json.loads(arm.results.read_text())["sweep"]
        assert sweep["error_counts"]["length_truncated"] == (4 if expect != "none" else 0)
        assert sweep["error_counts"]["schema_failure"] == 0
        assert sweep["length_control"]["controlled"] is False
        assert sweep["prefix_cache"]["points"]["c1-r0"]["flush"].startswith("erased")
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
