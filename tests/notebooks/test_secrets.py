"""A managed-endpoint arm with an API key: the key is read from the environment, used, and
found in no file of the run (a planted key, searched for byte by byte)."""
import gzip
import json
import os
import subprocess
import sys

import pytest
from stackbook.evidence.rundir import RunDir

KEY = "sk-planted-4f1b2c9d8e7a6b5c"


@pytest.fixture
def keyed_server(start_calibration_server):
    return start_calibration_server(api_key=KEY)


def test_api_key_never_reaches_outputs(keyed_server, tmp_path):
    campaign = tmp_path / "secret.yaml"
    campaign.write_text(f"""
name: secrets-test
model: {{name: calibration, source: embedded}}
protocol:
  workload: {{kind: synthetic, prompt_tokens: 24, output_tokens: 8}}
  arrival: {{kind: closed_loop, concurrency: [1]}}
  requests_per_point: 3
  repetitions: 1
  warmup_requests: 0
  canaries: {{run_sweep_on_hold: true}}
arms:
  - name: managed
    engine: {{kind: openai_endpoint, base_url: "{keyed_server.base_url}/v1", api_key_env: PLANTED_KEY,
              served_model: calibration}}
""")
    run_id = f"t-{tmp_path.name}"
    env = {**os.environ, "PLANTED_KEY": KEY}
    r = subprocess.run([sys.executable, "-m", "stackbook.cli", "run", str(campaign), "--run-id", run_id,
                        "--no-progress"],
                       capture_output=True, text=True, env=env, timeout=300)
    run_dir = RunDir.new("secrets-test", run_id)
    try:
        assert KEY not in r.stdout + r.stderr
        m = json.loads(run_dir.manifest.read_text())
        assert m["arms"]["managed"]["notebooks"].get("30_load_sweep", {}).get("status") == "ok", \
            json.dumps(m["arms"]["managed"])[-3000:]
        recs = [json.loads(line) for line in run_dir.arm("managed").requests.read_text().splitlines()]
        assert recs and all(x["status"] == 200 for x in recs)       # the key was used: no 401
        files = run_dir.files()
        assert len(files) >= 10
        assert run_dir.arm("managed").requests_sent in files  # the bodies are kept, compressed: search them too
        for p in files:
            data = gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
            assert KEY.encode() not in data, p
        resolved = run_dir.campaign_resolved.read_text()
        assert "api_key_env: PLANTED_KEY" in resolved
        passport = json.loads(run_dir.arm("managed").passport_json.read_text())
        assert passport["identity"]["launch"]["api_key_env"] == "PLANTED_KEY"
    finally:
        import shutil
        shutil.rmtree(run_dir, ignore_errors=True)


def test_missing_key_variable_is_a_clear_error(tmp_path):
    from stackbook.config.loading import load_campaign
    from stackbook.engines import adapter_for
    p = tmp_path / "c.yaml"
    p.write_text("""
name: t
model: {source: catalog, catalog: smollm2-135m}
protocol: {stages: [sizing]}
arms:
  - name: m
    engine: {kind: openai_endpoint, base_url: "https://api.example.com/v1", api_key_env: NOT_SET_ANYWHERE}
""")
    c = load_campaign(p)
    a = adapter_for(c, c.arms[0])
    assert a.remote
    with pytest.raises(RuntimeError, match="NOT_SET_ANYWHERE, which is not set; export NOT_SET_ANYWHERE"):
        a.headers()
