"""One writer per run directory, proved with real second processes: one holding the lock while
another asks for it, a holder killed with SIGKILL, and `stackbook run --resume` refused."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from stackbook.evidence.run_lock import RunLocked, hold_run, refuse_if_held
from stackbook.evidence.rundir import RunDir

HOLD = """
import sys, time
from stackbook.evidence.run_lock import hold_run
lock = hold_run(sys.argv[1], command=["stackbook", "run", "held-by-test"])
print("held", flush=True)
time.sleep(600)
"""

CAMPAIGN = """name: locked
model: {source: catalog, catalog: smollm2-135m}
protocol: {stages: [sizing]}
arms:
  - name: a
    engine: {kind: llama_cpp}
"""


def env():
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}


@pytest.fixture
def holder(tmp_path):
    """A second process holding the run's lock until it is killed."""
    procs = []

    def start(run_dir):
        p = subprocess.Popen([sys.executable, "-c", HOLD, str(run_dir)], stdout=subprocess.PIPE, text=True, env=env())
        assert p.stdout.readline().strip() == "held"
        procs.append(p)
        return p
    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def test_a_live_holder_is_named_and_a_dead_ones_lock_taken_over(tmp_path, holder):
    proc = holder(tmp_path)
    with pytest.raises(RunLocked) as refused:
        hold_run(tmp_path)
    msg = str(refused.value)
    assert f"pid {proc.pid}" in msg and "held-by-test" in msg and f"--resume {tmp_path}" in msg
    with pytest.raises(RunLocked):
        refuse_if_held(tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert RunDir(tmp_path).lock.exists()                    # the dead writer's file stays behind
    refuse_if_held(tmp_path)                                 # ... but the kernel let go of its lock
    with hold_run(tmp_path) as lock:
        assert lock.taken_over["pid"] == proc.pid
        note = lock.manifest_note()["lock_taken_over"]
        assert note["command"] == "stackbook run held-by-test" and note["taken_over_unix"] > 0
        assert json.loads(RunDir(tmp_path).lock.read_text())["pid"] == os.getpid()
    assert not RunDir(tmp_path).lock.exists()                # a clean release leaves no file
    with hold_run(tmp_path) as lock:
        assert lock.taken_over is None and lock.manifest_note() == {}


def test_a_second_writer_waits_for_nothing_and_the_first_keeps_its_lock(tmp_path):
    """Another process refused does not disturb the holder: after the refusal, the lock and the
    holder's record are still the first process's."""
    with hold_run(tmp_path, command=["first"]):
        r = subprocess.run([sys.executable, "-c", HOLD, str(tmp_path)], capture_output=True, text=True, env=env(),
                           timeout=60)
        assert r.returncode == 1 and "RunLocked" in r.stderr and f"pid {os.getpid()}" in r.stderr
        assert json.loads(RunDir(tmp_path).lock.read_text())["command"] == "first"


def test_resume_of_a_held_run_is_refused_naming_the_holder(tmp_path, holder):
    run = RunDir(tmp_path / "run")
    run.create()
    run.campaign_resolved.write_text(CAMPAIGN)
    proc = holder(run)
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "stackbook.cli", "run", "--resume", str(run), "--no-progress"],
                       capture_output=True, text=True, env=env(), timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert f"is being written by pid {proc.pid}" in r.stderr and f"kill {proc.pid}" in r.stderr
    assert not run.manifest.exists()                         # nothing written by the refused run
    assert time.monotonic() - t < 60


def test_a_directory_that_cannot_hold_the_lock_is_named(tmp_path):
    run = RunDir(tmp_path / "missing" / "run")               # no directory to hold a lock file in
    from stackbook.evidence.run_lock import RunRefused
    with pytest.raises(RunRefused, match="cannot be written"):
        hold_run(run)


ORPHAN = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
print(child.pid, flush=True)
child.wait()
"""
KERNEL = """
import time
from stackbook.evidence.run_lock import stop_with_parent
stop_with_parent(0.1)
time.sleep(60)
"""


def test_a_kernel_stops_when_the_runner_that_started_it_is_killed():
    import psutil
    runner = subprocess.Popen([sys.executable, "-c", ORPHAN, KERNEL], stdout=subprocess.PIPE, text=True, env=env())
    kernel = psutil.Process(int(runner.stdout.readline()))
    time.sleep(0.5)
    assert kernel.is_running() and kernel.status() != psutil.STATUS_ZOMBIE
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    t = time.monotonic()
    kernel.wait(timeout=10)                                  # raises if it outlives its runner
    assert time.monotonic() - t < 5
