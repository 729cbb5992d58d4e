"""Two llama.cpp replicas (one thread each) of the embedded model behind the real sglang-router:
the router's per-replica counts agree with the requests the client sent, and a replica killed
mid-point is failed over by the router, counted, and costs no record."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from stackbook.evidence.files import read_json
from stackbook.evidence.rundir import RunDir
from stackbook.loadgen.records import read_records
from stackbook.routing.registry import router_class

pytestmark = pytest.mark.engine

CAMPAIGN = """
name: routing-test
model: {source: embedded}
protocol:
  stages: [sweep]
  workload: {kind: synthetic, prompt_tokens: 32, output_tokens: OUT}
  arrival: {kind: closed_loop, concurrency: [2]}
  context_length: 512
  requests_per_point: 9
  repetitions: 1
  warmup_requests: 1
  request_timeout_s: 20
  canaries: {run_sweep_on_hold: true}
arms:
  - name: two
    engine: {kind: llama_cpp, threads: 1, parallel: 1}
    replicas: 2
    router: {kind: sglang, policy: round_robin}
"""


@pytest.fixture(scope="module")
def router_installed():
    kind = router_class("sglang")
    if not kind.is_installed():
        if os.environ.get("CI") or os.environ.get("STACKBOOK_REQUIRE_ENGINES"):
            pytest.fail(kind.install_hint())
        pytest.skip(kind.install_hint())


def test_router_counts_every_request_the_client_sent(real_engines, router_installed, run_module_campaign, tmp_path):
    run_dir = run_module_campaign(CAMPAIGN.replace("OUT", "4"), tmp_path / "routing.yaml", f"routing-{tmp_path.name}")
    arm = run_dir.arm("two")
    engine = read_json(arm.engine_json)
    assert len(engine["deployment"]["replicas"]) == 2 and engine["base_url"] == engine["deployment"]["router"]["url"]
    point = read_json(arm.results)["sweep"]["points"]["c2-r0"]
    routing = point["routing"]
    sent = [r for r in read_records(arm.requests) if r.point == "c2-r0"]
    assert all(r.ok for r in sent)
    served = [r["requests"] for r in routing["replicas"]]
    assert sum(served) == len(sent) == routing["router_counts"]["requests"]
    counts = routing["router_counts"]
    assert counts["selections"] == len(sent) + counts["retries"]  # a retried attempt is selected once more
    assert abs(served[0] - served[1]) <= 1 + counts["retries"]  # round robin over two replicas
    assert sum(routing["request_shares"]) == pytest.approx(1.0, abs=1e-3)
    assert sum(r["generated_tokens"] for r in routing["replicas"]) == sum(r.output_tokens_server for r in sent)
    assert "router" in point["cpu_seconds"]["engine"]  # the router's own CPU, read beside the replicas'
    assert point["cpu_seconds"]["engine"]["llama_server.http"] > 0  # the replicas' HTTP threads, read apart


def test_a_replica_killed_mid_point_is_failed_over_and_no_record_is_lost(real_engines, router_installed, tmp_path):
    path = tmp_path / "routing.yaml"
    path.write_text(CAMPAIGN.replace("OUT", "16").replace("requests_per_point: 9", "requests_per_point: 16"))
    run_id = f"routing-kill-{tmp_path.name}"
    run_dir = RunDir.new("routing-test", run_id)
    proc = subprocess.Popen([sys.executable, "-m", "stackbook.cli", "run", str(path), "--run-id", run_id,
                             "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        arm = run_dir.arm("two")
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not (arm.requests.exists()
                                                   and len(arm.requests.read_text().splitlines()) >= 5):
            time.sleep(0.2)
        victim = json.loads(arm.engine_json.read_text())["deployment"]["replicas"][1]
        os.kill(victim["pid"], signal.SIGKILL)
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out[-3000:]
        manifest = json.loads(run_dir.manifest.read_text())
        assert manifest["arms"]["two"]["status"] == "complete", manifest["arms"]["two"]
        lines = arm.requests.read_text().splitlines()
        records = [r for r in read_records(arm.requests) if r.point == "c2-r0"]
        assert len(read_records(arm.requests)) == len(lines)  # every line written is a complete record
        routing = read_json(arm.results)["sweep"]["points"]["c2-r0"]["routing"]
        counts = routing["router_counts"]
        assert counts["retries"] >= 1 and victim["base_url"] in counts["failed_attempts_by_replica"]
        # every request the client sent has its record; the router answered each but any cut mid-stream
        assert len(records) == 1 + 16 + 1 + sum(r.phase == "sentinel" for r in records)
        assert sum(r.ok for r in records) >= len(records) - 2
        assert routing["replicas"][0]["requests"] > routing["replicas"][1]["requests"]
    finally:
        if proc.poll() is None:
            proc.kill()
        if not os.environ.get("STACKBOOK_KEEP_TEST_RUNS"):
            import shutil
            shutil.rmtree(run_dir, ignore_errors=True)


def test_run_check_refuses_a_router_that_cannot_start_with_its_reason(router_installed, tmp_path):
    """The router is started once, alone, with the arm's settings: a flag it rejects is refused
    before any engine starts, naming the arm's router field; a second check of the same settings in
    the same process reuses the outcome."""
    from stackbook.cli import app
    from typer.testing import CliRunner

    text = CAMPAIGN.replace("OUT", "4").replace("policy: round_robin}", "policy: round_robin, "
                                                 "extra_args: [--no-such-router-flag]}")
    path = tmp_path / "bad-router.yaml"
    path.write_text(text)
    result = CliRunner().invoke(app, ["run", "--check", str(path)])
    assert result.exit_code != 0
    assert "arms[0].router: router 'sglang' cannot start here" in result.output
    assert "Traceback" not in result.output
    from stackbook.routing.preflight import started_once
    hits = started_once.cache_info().hits
    again = CliRunner().invoke(app, ["run", "--check", str(path)])  # the same settings: started once a process
    assert started_once.cache_info().hits == hits + 1 and again.output == result.output


def test_a_replica_that_never_becomes_healthy_fails_the_arm_before_anything_is_measured(
        real_engines, router_installed, run_module_campaign, tmp_path):
    text = CAMPAIGN.replace("OUT", "4").replace("parallel: 1}", "parallel: 1, extra_args: [--no-such-server-flag]}")
    run_dir = run_module_campaign(text, tmp_path / "bad-replica.yaml", f"routing-bad-{tmp_path.name}")
    entry = read_json(run_dir.manifest)["arms"]["two"]
    assert entry["status"] == "failed"
    assert "replica 0 of 2" in entry["error"] and "did not become ready" in entry["error"]
    requests = run_dir.arm("two").requests
    assert not requests.exists() or not list(read_records(requests))
