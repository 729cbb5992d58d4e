"""An endpoint's prompt cache, observed: two managed-endpoint arms in front of one server that
caches prompts and says so in its replies' usage (prompt_tokens_details.cached_tokens, as hosted
APIs do). The first arm meets a cold cache, the second is served the same prompts from it; the
fairness table reads the second warm against a cold protocol and keeps the pair from being ranked."""
import json
import subprocess
import sys

from stackbook.evidence.rundir import RunDir


def test_an_endpoint_arm_served_from_the_providers_cache_reads_warm(start_calibration_server, tmp_path):
    server = start_calibration_server(prompt_cache=True)
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
  canaries: {{run_sweep_on_hold: true}}
  discard_rules: {{max_wrong_fraction: 1}}   # the server's replies are not answers: its sentinels fail
arms:
  - name: first
    engine: {engine}
  - name: second
    engine: {engine}
""")
    run_id = f"t-{tmp_path.name}"
    r = subprocess.run([sys.executable, "-m", "stackbook.cli", "run", str(campaign), "--run-id", run_id, "--no-progress"],
                       capture_output=True, text=True, timeout=300)
    run_dir = RunDir.new("endpoint-cache-test", run_id)
    try:
        assert run_dir.analysis.exists(), r.stderr[-3000:]
        analysis = json.loads(run_dir.analysis.read_text())
        rows = {row["arm"]: row for row in analysis["fairness"]}
        assert rows["first"]["prefix_cache"].startswith("cold (configured cold): at most 0% of prompt tokens from cache")
        assert rows["second"]["prefix_cache"].startswith("warm (configured cold): at most 100% of prompt tokens")
        assert "prefix_cache" in rows["second"]["differs"] and not rows["second"]["comparable"]
        assert not [d for d in analysis["decisions"] if {d["arm_a"], d["arm_b"]} == {"first", "second"}]
        point = json.loads(run_dir.arm("second").results.read_text())["sweep"]["prefix_cache"]["points"]["c1-r0"]
        assert point["reported_hit_rate"] == 1.0 and point["engine_hit_rate"] is None
    finally:
        import shutil
        shutil.rmtree(run_dir, ignore_errors=True)
