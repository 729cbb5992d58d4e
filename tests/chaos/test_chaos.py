"""Faults injected into real runs (llama-server on the embedded model, one arm, a few short
requests): a client process killed mid-point, the output disk filling during the sweep, a torn
last record after a power loss, the engine frozen past the request timeout, a read-only output
directory. Each says what the manifest records, what was kept on disk, and that --resume ends
the run complete. The engine killed or frozen in a two-arm campaign, and the runner interrupted,
are in tests/engines/test_faults.py, whose helpers these tests share."""
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
from stackbook.locations import REPO_ROOT
import pytest
from stackbook.evidence.rundir import RunDir
from stackbook.loadgen.records import read_records

pytestmark = pytest.mark.engine

_spec = importlib.util.spec_from_file_location("fault_helpers",
                                               Path(__file__).parents[1] / "engines" / "test_faults.py")
faults = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(faults)
cleanup = faults.cleanup  # the fixture that removes the runs a test made

REQUESTS = 9       # measured requests per point: the fewest with which concurrency 2 can hold its load
CONCURRENCY = 2


def campaign_text(name: str, processes: int = 1, timeout_s: float = 30, concurrency=(CONCURRENCY,)) -> str:
    return f"""
name: {name}
model: {{source: embedded}}
protocol:
  stages: [sweep]
  workload: {{kind: synthetic, prompt_tokens: 32, output_tokens: 16}}   # a point lasts seconds: long enough to cut
  arrival: {{kind: closed_loop, concurrency: {list(concurrency)}}}
  context_length: 256
  requests_per_point: {REQUESTS}
  repetitions: 1
  warmup_requests: 1
  request_timeout_s: {timeout_s}
  canaries: {{run_sweep_on_hold: true}}
  loadgen: {{processes: {processes}}}
arms:
  - name: only
    engine: {{kind: llama_cpp, parallel: {CONCURRENCY}}}
"""


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "stackbook.cli", *args]


@pytest.fixture
def chaos_run(tmp_path, cleanup):
    """Start `stackbook run` of a one-arm campaign in its own session (so a test can cut its whole
    process tree, as a power loss would); returns (process, run directory). A run the test left
    going is stopped (SIGTERM: the runner stops its engine) and its campaign directory removed."""
    procs = []

    def start(name: str, run_id: str = "chaos", **campaign):
        path = tmp_path / f"{name}.yaml"
        path.write_text(campaign_text(name, **campaign))
        run_dir = RunDir.new(name, run_id)
        cleanup.append(run_dir)
        proc = subprocess.Popen(cli("run", str(path), "--run-id", run_id, "--no-progress"), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        procs.append((proc, run_dir))
        return proc, run_dir
    yield start
    for proc, run_dir in procs:
        if proc.poll() is None:
            proc.terminate()
            proc.communicate(timeout=120)
        campaign_dir = run_dir.path.parent
        if not os.environ.get("STACKBOOK_KEEP_TEST_RUNS") and campaign_dir.is_dir() and not is_mounted(campaign_dir):
            shutil.rmtree(run_dir.path, ignore_errors=True)
            if not any(campaign_dir.iterdir()):
                campaign_dir.rmdir()


@pytest.fixture
def mounted(tmp_path):
    """A file system mounted at outputs/<campaign> for one test (root only): a small tmpfs, or a
    read-only bind of an empty directory; unmounted and removed afterwards."""
    made: list[Path] = []

    def mount(campaign: str, how: str) -> Path:
        target = RunDir.new(campaign, "x").path.parent
        assert not target.exists(), f"{target} exists; remove it first"
        target.mkdir(parents=True)
        made.append(target)
        empty = tmp_path / "empty"
        empty.mkdir()
        args = (["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(target)] if how == "tmpfs" else
                ["mount", "--bind", "-o", "ro", str(empty), str(target)])
        r = subprocess.run(args, capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"this host cannot mount a file system for the test ({r.stderr.strip()[:200]}); run as root")
        return target

    yield mount
    for target in made:
        while is_mounted(target):
            if subprocess.run(["umount", str(target)], capture_output=True).returncode != 0:
                time.sleep(0.5)
        shutil.rmtree(target, ignore_errors=True)


def is_mounted(path: Path) -> bool:
    """A mount point, bind mounts included (os.path.ismount misses a bind within one file system)."""
    where = str(path.resolve())
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == where for line in f)


def manifest(run_dir: RunDir) -> dict:
    return json.loads(run_dir.manifest.read_text())


def resume(run_dir: RunDir) -> subprocess.CompletedProcess:
    return subprocess.run(cli("run", "--resume", str(run_dir), "--no-progress"), capture_output=True, text=True,
                          timeout=600)


def resume_completes(run_dir: RunDir, attempts: int = 2, concurrency=(CONCURRENCY,), answered: float = 1.0) -> dict:
    """--resume ends the run complete, with the point measured in full once at its latest attempt
    (at least `answered` of its requests answered) and the cut attempt's records on disk beside it."""
    r = resume(run_dir)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    m = manifest(run_dir)
    assert m["status"] == "complete" and m["resumed"] == 1 and m["arms"]["only"]["status"] == "complete"
    arm = run_dir.arm("only")
    kept = faults.records_intact(arm)
    latest = [rec for rec in read_records(arm.requests, latest_attempt=True) if rec.phase != "sentinel"]
    per_point = {}
    for rec in latest:
        per_point[rec.point] = per_point.get(rec.point, 0) + 1
    # warm-up 1 + measured + cool-down (concurrency - 1) at each point, all answered
    assert per_point == {f"c{c}-r0": REQUESTS + c for c in concurrency}
    assert sum(rec.ok for rec in latest) >= answered * len(latest)
    assert {rec.attempt for rec in kept} == set(range(attempts)), "the cut attempt's records stay beside the new"
    assert not run_dir.lock.exists()
    return m


def wait_until(predicate, timeout=120, what="the condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what}: not after {timeout} s")


def lines(path: Path) -> int:
    try:
        return len(path.read_bytes().splitlines())
    except OSError:
        return 0


def client_processes(runner: subprocess.Popen) -> list[psutil.Process]:
    try:
        tree = psutil.Process(runner.pid).children(recursive=True)
    except psutil.Error:
        return []
    found = []
    for p in tree:
        try:
            if "stackbook.loadgen.client_processes" in " ".join(p.cmdline()):
                found.append(p)
        except psutil.Error:  # ended meanwhile
            pass
    return found


def test_a_client_process_killed_mid_point(real_engines, chaos_run):
    proc, run_dir = chaos_run("chaos-client", processes=2)
    arm = run_dir.arm("only")
    parts = arm.client_parts
    wait_until(lambda: sum(lines(p) for p in parts.glob("p*.requests.jsonl")) >= 3, what="3 records from the clients")
    # The clients of the point now sending (an earlier point's have ended).
    clients = wait_until(lambda: len(client_processes(proc)) == 2 and client_processes(proc), what="two clients")
    clients[0].send_signal(signal.SIGKILL)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 1, out[-2000:]
    m = manifest(run_dir)
    entry = m["arms"]["only"]
    assert m["status"] == "incomplete" and entry["status"] == "failed"
    assert "client process 0 exited with -9" in entry["notebooks"]["30_load_sweep"]["error"]
    # The surviving client's records and the killed one's, as far as it got, stay as the cut attempt.
    kept = sum(lines(p) for p in parts.glob("p*.requests.jsonl")) + lines(arm.requests)
    assert kept >= 3
    faults.assert_gone(faults.engine_pid(arm))
    resume_completes(run_dir)


def test_the_output_disk_fills_during_the_sweep(real_engines, chaos_run, mounted):
    outputs = mounted("chaos-full", "tmpfs")
    proc, run_dir = chaos_run("chaos-full")
    arm = run_dir.arm("only")
    wait_until(lambda: lines(arm.requests) >= 3, what="3 records")
    filler = outputs / "filler"
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True)   # until ENOSPC
    before = arm.requests.read_bytes()
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 1, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert "No space left on device" in out and f"stackbook run --resume {run_dir}" in out
    m = manifest(run_dir)                                   # the last manifest that could be written
    assert m["status"] == "running" and m["arms"]["only"]["status"] in ("running", "failed")
    assert arm.requests.read_bytes().startswith(before[:before.rfind(b"\n") + 1])   # earlier records kept
    assert not list(run_dir.path.glob(".manifest.json.*")), "no half-written manifest beside the old one"
    faults.assert_gone(faults.engine_pid(arm))
    kept = arm.requests.read_bytes()
    r = resume(run_dir)                                     # still full: stopped again, nothing lost
    assert r.returncode in (1, 2) and "No space left on device" in r.stderr and "Traceback" not in r.stderr
    assert arm.requests.read_bytes() == kept and manifest(run_dir)["status"] == "running"
    filler.unlink()
    m = resume_completes(run_dir)
    assert "lock_taken_over" not in m                       # the stopped runs let go of their lock


def test_a_torn_last_line_after_a_power_loss(real_engines, chaos_run):
    proc, run_dir = chaos_run("chaos-torn")
    arm = run_dir.arm("only")
    wait_until(lambda: lines(arm.requests) >= 4, what="4 records")
    tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    assert faults.engine_pid(arm) in {p.pid for p in tree}
    for p in tree:                                          # the runner, its kernel, the engine: all at once
        p.send_signal(signal.SIGKILL)
    proc.wait(30)
    psutil.wait_procs(tree, timeout=30)
    whole = arm.requests.read_bytes()
    assert whole.endswith(b"\n")
    complete = [json.loads(x) for x in whole.splitlines()]
    with open(arm.requests, "ab") as f:                     # the write the power cut in half
        f.write(b'{"run_id": "chaos", "arm": "only", "point": "c2-r0", "phase": "meas')
    assert manifest(run_dir)["status"] == "running"         # nobody could say otherwise
    m = resume_completes(run_dir)
    assert m["lock_taken_over"]["pid"] == proc.pid
    after = arm.requests.read_bytes()
    assert after.startswith(whole), "every complete record from before the cut is kept, byte for byte"
    assert b'"phase": "meas{' not in after and len(read_records(arm.requests)) == len(after.splitlines())
    assert [r.request_index for r in read_records(arm.requests)][:len(complete)] == \
        [c["request_index"] for c in complete]


def test_the_engine_frozen_past_the_request_timeout(real_engines, chaos_run):
    # Frozen once the first point is measured: every request of the second one then times out.
    proc, run_dir = chaos_run("chaos-frozen", timeout_s=5, concurrency=(1, 2))
    arm = run_dir.arm("only")
    wait_until(lambda: lines(arm.requests) >= REQUESTS + 1, timeout=180, what="the first point")
    engine = faults.engine_pid(arm)
    os.kill(engine, signal.SIGSTOP)
    frozen_at = lines(arm.requests)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 1, out[-2000:]
    m = manifest(run_dir)
    assert m["status"] == "incomplete" and m["arms"]["only"]["status"] == "failed"
    assert "not answering" in m["arms"]["only"]["notebooks"]["30_load_sweep"]["error"]
    kept = faults.records_intact(arm)
    assert sum(r.ok for r in kept) >= frozen_at - 1 and any(r.error_class == "timeout" for r in kept)
    faults.assert_gone(engine)                              # stopped although frozen
    # A 5 s timeout on a loaded 2-core host can cut a slow request of the resumed points too.
    m = resume_completes(run_dir, concurrency=(1, 2), answered=0.8)
    latest = read_records(arm.requests, latest_attempt=True)
    assert {r.attempt for r in latest if r.point == "c2-r0"} == {1} and {r.attempt for r in latest
                                                                         if r.point == "c1-r0"} == {0}
    assert m["arms"]["only"]["engine_starts"] == 2


def test_a_read_only_output_directory_is_refused_at_start(tmp_path, mounted):
    outputs = mounted("chaos-readonly", "ro")
    path = tmp_path / "c.yaml"
    path.write_text(campaign_text("chaos-readonly"))
    before = {p.pid for p in psutil.process_iter()}
    r = subprocess.run(cli("run", str(path), "--run-id", "ro", "--no-progress"), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "output directory:" in r.stderr and "cannot be written (Read-only file system)" in r.stderr
    assert not (outputs / "ro").exists()                   # nothing written, nothing started
    started = [p for p in psutil.process_iter(["pid", "name", "cwd"]) if p.pid not in before
               and p.info["name"] == "llama-server"
               and p.info["cwd"] == str(REPO_ROOT)]  # this checkout's, not another's
    assert started == []
