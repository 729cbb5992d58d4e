"""Failure counts that fire on a real engine: llama-server given a context of 256 tokens per slot
(`-c 256`, after the campaign's own) while the protocol asks for 64-token replies to 200-token
prompts (about 230 with the chat template). The engine ends every forced-length reply short of
what was asked: truncated by the engine. Its realized context is read from its log, below the
configured one. The canaries that need more context fail as requests, and the tool check, kept
in scope, fails on llama.cpp."""
import json

import pytest

pytestmark = pytest.mark.engine

CAMPAIGN = """
name: failure-counts-test
model: {source: embedded}
protocol:
  workload: {kind: synthetic, prompt_tokens: 200, output_tokens: 64}
  arrival: {kind: closed_loop, concurrency: [1]}
  context_length: 1024
  requests_per_point: 3
  repetitions: 1
  warmup_requests: 0
  canaries:
    suite: embedded-smollm2
    run_sweep_on_hold: true
    out_of_scope: {multi_turn: single-turn requests, instruction_following: replies not judged for wording,
                   batch_invariance: speed only}
arms:
  - name: short-context
    engine: {kind: llama_cpp, parallel: 1, extra_args: ["-c", "256"],
             overrides_managed: {"-c": "a context below the protocol's, so the engine cuts replies short"}}
"""


@pytest.fixture(scope="module")
def run(run_module_campaign, tmp_path_factory):
    d = tmp_path_factory.mktemp("failure-counts")
    return run_module_campaign(CAMPAIGN, d / "failure-counts.yaml", run_id=f"test-{d.name}")


def test_forced_replies_cut_by_the_engine_are_counted_as_its_truncation(run):
    sweep = json.loads(run.arm("short-context").results.read_text())["sweep"]
    counts = sweep["error_counts"]
    assert counts["length_truncated_by_engine"] == 3 and counts["length_truncated_by_budget"] == 0
    passport = json.loads(run.arm("short-context").passport_json.read_text())
    assert passport["validity"]["failure_counts"]["under_load"]["length_truncated_by_engine"] == 3


def test_the_realized_context_is_the_engines_not_the_configured_one(run):
    realized = json.loads(run.arm("short-context").engine_json.read_text())["realized_capacity"]
    assert (realized["limits"]["context"]["realized"], realized["limits"]["context"]["configured"]) == (256, 1024)
    assert realized["max_concurrency"] == 1


def test_the_canaries_count_each_failure_by_its_cause(run):
    canaries = json.loads(run.arm("short-context").results.read_text())["canaries"]
    gating = canaries["counts"]["gating"]
    assert canaries["verdict"] == "HOLD"
    assert gating["schema_or_tool_failure"] >= 1     # the tool check, in scope: no tool call from llama.cpp
    assert gating["request_failed"] >= 1             # prompts longer than the 256-token context are refused
    assert gating["failed"] == sum(gating[k] for k in ("admission_rejected", "length_truncated",
                                                       "schema_or_tool_failure", "completed_but_wrong",
                                                       "request_failed"))
