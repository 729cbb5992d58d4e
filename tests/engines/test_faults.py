"""Faults against a real engine (llama-server on the embedded model): the engine killed
mid-sweep, the runner interrupted or terminated. In every case the completed records are intact,
the arm says what happened, no engine is left running, and --resume finishes the run without
duplicating records. (The engine frozen mid-sweep, then resumed: tests/chaos.)"""
import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from stackbook.evidence.rundir import ArmDir, RunDir
from stackbook.loadgen.records import read_records

pytestmark = pytest.mark.engine

CAMPAIGN = """
name: faults
model: {source: embedded}
protocol:
  stages: [sweep]
  workload: {kind: synthetic, prompt_tokens: 32, output_tokens: 8}
  arrival: {kind: closed_loop, concurrency: [1, 2]}
  context_length: 512
  requests_per_point: 9   # the fewest that can hold concurrency 2 (measure.validity.measured_requests_for)
  repetitions: 1
  warmup_requests: 1
  request_timeout_s: 15   # a reply takes well under a second; the margin is for a host other tests load
  canaries: {run_sweep_on_hold: true}
arms:
  - name: first
    engine: {kind: llama_cpp, parallel: 2}
  - name: second
    engine: {kind: llama_cpp, parallel: 2}
"""


def start_run(tmp_path, run_id):
    path = tmp_path / "faults.yaml"
    path.write_text(CAMPAIGN)
    proc = subprocess.Popen([sys.executable, "-m", "stackbook.cli", "run", str(path), "--run-id", run_id,
                             "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, RunDir.new("faults", run_id)


def wait_for_records(arm_dir: ArmDir, n: int, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        p = arm_dir.requests
        if p.exists() and len(p.read_text().splitlines()) >= n:
            return
        time.sleep(0.2)
    raise AssertionError(f"fewer than {n} records in {arm_dir} after {timeout} s")


def engine_pid(arm_dir: ArmDir) -> int:
    return json.loads(arm_dir.engine_json.read_text())["pid"]


def assert_gone(pid: int):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return
        time.sleep(0.2)
    raise AssertionError(f"engine {pid} is still running")


def manifest(run_dir):
    return json.loads(run_dir.manifest.read_text())


def records_intact(arm_dir: ArmDir) -> list:
    lines = arm_dir.requests.read_text().splitlines()
    recs = read_records(arm_dir.requests)
    assert len(recs) == len(lines), "every line written is a complete record"
    return recs


def resume_and_check(run_dir: RunDir):
    r = subprocess.run([sys.executable, "-m", "stackbook.cli", "run", "--resume", str(run_dir), "--no-progress"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    m = manifest(run_dir)
    assert m["status"] == "complete" and m["resumed"] == 1
    for arm in ("first", "second"):
        latest = read_records(run_dir.arm(arm).requests, latest_attempt=True)
        per_point = {}
        for rec in latest:
            if rec.phase != "sentinel":  # the canary prompts mixed into each point, counted apart
                per_point[rec.point] = per_point.get(rec.point, 0) + 1
        # warm-up 1 + measured 9 + cool-down (c - 1): no point counted twice after the resume
        assert per_point == {"c1-r0": 10, "c2-r0": 11}, per_point
        failed = [(r.point, r.phase.value, r.request_index, r.attempt, r.error_class, r.error)
                  for r in latest if not r.ok]
        assert not failed, failed
    return m


@pytest.fixture
def cleanup():
    dirs = []
    yield dirs
    import shutil
    if not os.environ.get("STACKBOOK_KEEP_TEST_RUNS"):
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


def test_engine_killed_mid_sweep(real_engines, tmp_path, cleanup):
    proc, run_dir = start_run(tmp_path, f"kill-{tmp_path.name}")
    cleanup.append(run_dir)
    first = run_dir.arm("first")
    wait_for_records(first, 4)
    pid = engine_pid(first)
    os.kill(pid, signal.SIGKILL)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 1, out[-2000:]
    m = manifest(run_dir)
    assert m["arms"]["first"]["status"] == "engine_died", m["arms"]["first"]
    assert m["arms"]["second"]["status"] == "complete"       # the campaign went on
    kept = records_intact(first)
    assert len([r for r in kept if r.ok]) >= 4
    assert_gone(pid)
    assert_gone(engine_pid(run_dir.arm("second")))
    m = resume_and_check(run_dir)
    assert m["arms"]["first"]["engine_starts"] == 2
    passport = json.loads(first.passport_json.read_text())
    assert passport["validity"]["engine_restarts"] == 1


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_runner_interrupted(real_engines, tmp_path, cleanup, sig):
    proc, run_dir = start_run(tmp_path, f"{sig.name}-{tmp_path.name}")
    cleanup.append(run_dir)
    first = run_dir.arm("first")
    wait_for_records(first, 3)
    pid = engine_pid(first)
    t = time.monotonic()
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig, out[-2000:]
    assert time.monotonic() - t < 60
    m = manifest(run_dir)
    assert m["status"] == "interrupted" and m["interrupted_by"] == sig.name
    assert m["arms"]["first"]["status"] == "interrupted"
    assert "second" not in m["arms"] or m["arms"]["second"]["status"] == "pending"
    assert len(records_intact(first)) >= 3
    assert_gone(pid)
    if sig == signal.SIGINT:  # the resume after either signal is the same code; once is enough
        resume_and_check(run_dir)
