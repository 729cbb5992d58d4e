"""An endpoint's prompt cache, observed and kept out: two managed-endpoint arms in front of one
server that caches prompts and says so in its replies' usage (prompt_tokens_details.cached_tokens,
as hosted APIs do). Unsalted, the first arm meets a cold cache and the second is served the same
prompts from it: the fairness table reads the second warm against a cold protocol and keeps it
out of the ranking, and the verdict names the setting that would keep it in. With
protocol.cache_salt every arm's prompts open with their own salt: both read cold, and their prompts
still compare the same."""
import json
import shutil
import subprocess
import sys

import pytest
from stackbook.evidence.rundir import RunDir


def run_pair(server, tmp_path, salt: bool) -> tuple[dict, RunDir]:
    engine = f'{{kind: openai_endpoint, base_url: "{server.base_url}/v1", served_model: calibration}}'
    campaign = tmp_path / "cache.yaml"
    campaign.write_text(f"""
name: endpoint-cache-test
model: {{name: calibration, source: embedded}}
protocol:
  stages: [sweep]
  workload: {{kind: synthetic, prompt_tokens: 24, output_tokens: 4}}
  arrival: {{kind: closed_loop, concurrency: [1]}}
  requests_per_point: 4
  repetitions: 1
  warmup_requests: 0
  prefix_cache: cold
  cache_salt: {str(salt).lower()}
  canaries: {{run_sweep_on_hold: true}}
  discard_rules: {{max_wrong_fraction: 1}}   # the server's replies are not answers: its sentinels fail
arms:
  - name: first
    engine: {engine}
  - name: second
    engine: {engine}
""")
    run_id = f"t-{tmp_path.name}-{salt}"
    r = subprocess.run([sys.executable, "-m", "stackbook.cli", "run", str(campaign), "--run-id", run_id,
                        "--no-progress"],
                       capture_output=True, text=True, timeout=300)
    run_dir = RunDir.new("endpoint-cache-test", run_id)
    assert run_dir.analysis.exists(), r.stderr[-3000:]
    return {row["arm"]: row for row in json.loads(run_dir.analysis.read_text())["fairness"]}, run_dir


@pytest.fixture
def caching_server(start_calibration_server):
    yield start_calibration_server(prompt_cache=True)
    shutil.rmtree(RunDir.new("endpoint-cache-test", "x").path.parent, ignore_errors=True)


def test_an_endpoint_arm_served_from_the_providers_cache_reads_warm(caching_server, tmp_path):
    rows, run_dir = run_pair(caching_server, tmp_path, salt=False)
    assert rows["first"]["prefix_cache"].startswith("cold (configured cold): at most 0% of prompt tokens from cache")
    assert rows["second"]["prefix_cache"].startswith("warm (configured cold): at most 100% of prompt tokens")
    assert "prefix_cache" in rows["second"]["differs"] and not rows["second"]["comparable"]
    verdict = json.loads(run_dir.analysis.read_text())["verdict"]
    line = next(x for x in verdict if x.startswith("Not comparable (protocol differs): "))
    assert "second" in line and "To make them comparable: set protocol.cache_salt: true" in line, verdict
    point = json.loads(run_dir.arm("second").results.read_text())["sweep"]["prefix_cache"]["points"]["c1-r0"]
    assert point["reported_hit_rate"] == 1.0 and point["engine_hit_rate"] is None and "salt" not in point


def test_salted_prompts_keep_every_arm_cold_and_still_compare_the_same(caching_server, tmp_path):
    rows, run_dir = run_pair(caching_server, tmp_path, salt=True)
    for arm in ("first", "second"):
        assert rows[arm]["prefix_cache"].startswith("cold (configured cold): at most 0% of prompt tokens from cache")
        assert "prefix_cache" not in (rows[arm]["differs"] or "") and "prompts" not in (rows[arm]["differs"] or "")
    salts = {arm: json.loads(run_dir.arm(arm).results.read_text())["sweep"]["prefix_cache"]["points"]["c1-r0"]["salt"]
             for arm in ("first", "second")}
    assert salts["first"] != salts["second"] and all(s.startswith("[salt ") for s in salts.values())
    passport = json.loads(run_dir.arm("first").passport_json.read_text())
    assert passport["protocol"]["prefix_cache"] == "cold, every point's prompts salted apart (cache_salt)"
    assert passport["validity"]["prefix_cache"]["points"]["c1-r0"]["salt"] == salts["first"]
