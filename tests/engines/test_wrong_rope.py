"""Wrong answers under load against a real engine: llama-server on the embedded model with a
wrong RoPE base (--rope-freq-base 1000) still answers fluently ("2 + 2 = 4") but not rightly
(the capital of France). The canaries HOLD it; measured on request, every point whose sentinels
answered wrongly is discarded by the preregistered rule max_wrong_fraction."""
import json

import pytest

pytestmark = pytest.mark.engine

CAMPAIGN = """
name: wrong-rope-test
model: {source: embedded}
protocol:
  workload: {kind: synthetic, prompt_tokens: 32, output_tokens: 8}
  arrival: {kind: closed_loop, concurrency: [1]}
  context_length: 1024
  requests_per_point: 3
  repetitions: 1
  warmup_requests: 0
  canaries:
    suite: SUITE   # a fact it gets wrong, a sum it gets right; the whole suite is test_end_to_end's
    run_sweep_on_hold: true
arms:
  - name: wrong-rope
    engine: {kind: llama_cpp, parallel: 1, extra_args: [--rope-freq-base, "1000"]}
"""


@pytest.fixture(scope="module")
def run(run_module_campaign, tmp_path_factory, canary_subset):
    d = tmp_path_factory.mktemp("wrong-rope")
    campaign = CAMPAIGN.replace("SUITE", canary_subset("capital-of-france", "two-plus-two"))
    return run_module_campaign(campaign, d / "wrong-rope.yaml", run_id=f"test-{d.name}")


def test_the_canaries_hold_a_fluent_but_wrong_engine(run):
    canaries = json.loads(run.arm("wrong-rope").results.read_text())["canaries"]
    outcome = {c["id"]: c["outcome"] for c in canaries["checks"]}
    assert canaries["verdict"] == "HOLD"
    assert outcome["capital-of-france"] == "FAIL" and outcome["two-plus-two"] == "PASS"
    assert canaries["counts"]["gating"]["failed"] >= 1 and canaries["counts"]["gating"]["request_failed"] == 0


def test_its_points_are_discarded_because_the_sentinels_answered_wrongly(run):
    sweep = json.loads(run.arm("wrong-rope").results.read_text())["sweep"]
    wrong = [d for d in sweep["discards"] if d["rule"] == "max_wrong_fraction"]
    assert [d["point"] for d in wrong] == ["c1-r0"]
    assert wrong[0]["detail"] == "1/1 sentinels answered wrongly (> 0%)"
    # The sentinel babbled to its bound ("Awesome! You've got a lot to work with."): answered, wrongly.
    assert sweep["error_counts"]["sentinels"]["answered_wrongly"] == 1
    passport = json.loads(run.arm("wrong-rope").passport_json.read_text())
    assert passport["results"]["label"] == "HOLD"
    assert "max_wrong_fraction" in {d["rule"] for d in passport["validity"]["discards"]}
