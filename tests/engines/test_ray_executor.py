"""The ray executor on a local two-node cluster (one CPU each, custom resources node_a and
node_b): arms placed by their resources, every arm folder shipped back into the run directory
with its node in the manifest, a real llama.cpp arm, Ctrl-C on `stackbook run --executor ray`
(the task cancelled, its engine stopped), a node lost mid-arm (then resumed on a new node), and a
resource no node holds refused at once."""
import json
import os
import threading
import time

import nbformat
import psutil
import pytest
import yaml
from stackbook.engines.llama_cpp import LlamaCppAdapter
from stackbook.evidence.rundir import RunDir
from stackbook.loadgen.records import read_records
from stackbook.locations import REPO_ROOT
from stackbook.model.artifacts import embedded_artifacts
from stackbook.runner import run_campaign

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def cluster():
    """A head that runs no arm (no CPU) and two one-CPU nodes; their workers import this
    checkout's library."""
    from ray.cluster_utils import Cluster

    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT / "lib"), old) if p)
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    ray.init(address=c.address, log_to_driver=False)  # before the other nodes: the driver attaches to the head
    nodes = {"node_a": c.add_node(num_cpus=1, resources={"node_a": 1}),
             "node_b": c.add_node(num_cpus=1, resources={"node_b": 1})}
    c.wait_for_nodes()
    yield c, {name: n.node_id for name, n in nodes.items()}, nodes
    ray.shutdown()
    c.shutdown()
    if old is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = old


@pytest.fixture
def runs():
    dirs = []
    yield dirs
    import shutil
    if not os.environ.get("STACKBOOK_KEEP_TEST_RUNS"):
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
            try:
                d.path.parent.rmdir()  # outputs/<campaign>/, when no other run is there
            except OSError:
                pass


@pytest.fixture(scope="module")
def llama_ready():
    art = embedded_artifacts()
    missing = None
    if not art.gguf.exists():
        missing = "the embedded model is not set up (make test sets it up)"
    elif not LlamaCppAdapter.installed_executable().exists():
        missing = "llama-server is not built (make test builds it)"
    if missing:
        if os.environ.get("CI") or os.environ.get("STACKBOOK_REQUIRE_ENGINES"):
            pytest.fail(missing)
        pytest.skip(missing)


def ray_run(campaign_path, run_id, runs, **kw):
    from stackbook.executors.ray_cluster import RayExecutor

    if run_id:
        runs.append(RunDir.new(yaml.safe_load(campaign_path.read_text())["name"], run_id))
    return run_campaign(str(campaign_path), run_id=run_id, progress=False, executor=RayExecutor(), **kw)


def manifest(run: RunDir) -> dict:
    return json.loads((REPO_ROOT / run.manifest).read_text())


def assert_gone(pid: int, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return
        time.sleep(0.5)
    raise AssertionError(f"engine {pid} is still running")


def test_unsatisfiable_resource_fails_at_once(cluster, tmp_path, runs):
    seed = yaml.safe_load((REPO_ROOT / "campaigns/seed-qwen3.8-27b.yaml").read_text())
    seed.update(name="ray-unsatisfiable", arms=[{**seed["arms"][0], "resources": {"gpu_z": 1}}])
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(seed))
    t = time.monotonic()
    run = ray_run(path, f"test-{tmp_path.name}", runs)
    m = manifest(run)
    arm = m["arms"]["vllm"]
    assert arm["status"] == "failed" and "'gpu_z'" in arm["error"] and "node_a" in arm["error"], arm
    assert time.monotonic() - t < 120  # refused before submitting; the rest is the analysis notebook
    assert not run.arm("vllm").notebook("10_sizing").exists()


def test_seed_campaign_arms_placed_and_shipped_back(cluster, tmp_path, runs):
    _, node_ids, _ = cluster
    seed = yaml.safe_load((REPO_ROOT / "campaigns/seed-qwen3.8-27b.yaml").read_text())
    pins = {"vllm": "node_a", "sglang-default": "node_b", "sglang-no-radix": "node_a"}
    for arm in seed["arms"]:
        arm["resources"] = {pins[arm["name"]]: 1}
    seed["name"] = "ray-seed"
    path = tmp_path / "seed.yaml"
    path.write_text(yaml.safe_dump(seed))
    run = ray_run(path, f"test-{tmp_path.name}", runs)
    m = manifest(run)
    assert m["status"] == "complete" and m["executor"] == "ray", json.dumps(m, indent=1)[:3000]
    assert m["absolute_paths_left"] == []
    resolved = yaml.safe_load(run.campaign_resolved.read_text())
    assert {a["name"]: a["resources"] for a in resolved["arms"]} == {k: {v: 1.0} for k, v in pins.items()}
    spans = {}
    for name, node in pins.items():
        arm = m["arms"][name]
        placed = arm["placement"]
        assert placed["node_id"] == node_ids[node] and placed["host"], placed
        assert placed["resources"] == {"CPU": 1.0, node: 1.0}
        nb_path = run.arm(name).notebook("10_sizing")
        nb = nbformat.read(nb_path, as_version=4)
        assert nb.metadata["papermill"]["parameters"]["run_dir"] == str(run)  # relative, as the local executor
        assert arm["notebooks"]["10_sizing"]["status"] == "ok"
        assert m["outputs"][f"arms/{name}/10_sizing.ipynb"] == arm["notebooks"]["10_sizing"]["sha256"]
        passport = json.loads(run.arm(name).passport_json.read_text())
        assert passport["identity"]["host"]["arithmetic_done_on"]["cpu"]
        spans[name] = (placed["started_unix"], placed["finished_unix"])
    # the two arms pinned to node_a ran one after the other
    a, b = sorted([spans["vllm"], spans["sglang-no-radix"]])
    assert a[1] <= b[0], spans
    assert run.analysis_notebook.exists()


SMALL = """
name: ray-llama
model: {source: embedded}
protocol:
  stages: [sweep]
  workload: {kind: synthetic, prompt_tokens: 32, output_tokens: 8}
  arrival: {kind: closed_loop, concurrency: [1]}
  context_length: 256
  requests_per_point: 3
  repetitions: 1
  warmup_requests: 1
  canaries: {run_sweep_on_hold: true}
arms:
  - name: llama
    engine: {kind: llama_cpp, threads: 1, parallel: 1}
    resources: {node_b: 1}
"""


def test_real_llama_arm_runs_on_a_node_and_comes_back(cluster, llama_ready, tmp_path, runs):
    _, node_ids, _ = cluster
    path = tmp_path / "llama.yaml"
    path.write_text(SMALL)
    run = ray_run(path, f"test-{tmp_path.name}", runs)
    m = manifest(run)
    arm = m["arms"]["llama"]
    assert arm["status"] == "complete", json.dumps(m, indent=1)[:3000]
    assert arm["placement"]["node_id"] == node_ids["node_b"]
    d = run.arm("llama")
    for f in (d.notebook("30_load_sweep"), d.engine_log, d.engine_json, d.requests, d.requests_sent, d.results,
              d.passport_json):
        assert f.stat().st_size > 0, f
    assert len(d.requests.read_text().splitlines()) >= 4
    engine = json.loads(d.engine_json.read_text())
    assert engine["host"]["cpu"] and json.loads(d.passport_json.read_text())["identity"]["host"] == engine["host"]
    assert_gone(engine["pid"])
    assert m["absolute_paths_left"] == []


def test_ctrl_c_cancels_the_arm_and_its_engine_stops(cluster, llama_ready, tmp_path, runs):
    import signal
    import subprocess
    import sys

    c, _, _ = cluster
    path = tmp_path / "ctrlc.yaml"
    path.write_text(SMALL.replace("name: ray-llama", "name: ray-ctrlc").replace("requests_per_point: 3",
                                                                                "requests_per_point: 400"))
    run_id = f"test-{tmp_path.name}"
    run = RunDir.new("ray-ctrlc", run_id)
    runs.append(run)
    proc = subprocess.Popen([sys.executable, "-m", "stackbook.cli", "run", str(path), "--run-id", run_id,
                             "--no-progress", "--executor", "ray", "--ray-address", c.address],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    home = run.arm("llama")
    deadline = time.monotonic() + 300
    while not (home.engine_json.exists() and home.requests.exists()) and time.monotonic() < deadline:
        time.sleep(0.5)
    pid = json.loads(home.engine_json.read_text())["pid"]
    t = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGINT, out[-2000:]
    assert time.monotonic() - t < 90
    assert_gone(pid)
    m = manifest(run)
    assert m["status"] == "interrupted" and m["arms"]["llama"]["status"] == "interrupted", m["arms"]
    assert home.requests.read_text().count("\n") >= 1


LOSS = """
name: ray-loss
model: {source: embedded}
variables_under_test: [stages]
protocol:
  stages: [sweep]
  workload: {kind: synthetic, prompt_tokens: 32, output_tokens: 16}
  arrival: {kind: constant, rates: [1.0]}   # paced, so the sweep lasts about 14 s on any host
  context_length: 256
  requests_per_point: 12
  repetitions: 1
  warmup_requests: 1
  canaries: {run_sweep_on_hold: true}
arms:
  - name: lost
    engine: {kind: llama_cpp, threads: 1, parallel: 1}
    resources: {node_b: 1}
  - name: kept
    engine: {kind: llama_cpp, threads: 1, parallel: 1}
    resources: {node_a: 1}
    protocol_overrides: {stages: [sizing]}
"""


def test_lost_node_marks_its_arm_and_the_other_finishes(cluster, llama_ready, tmp_path, runs):
    c, node_ids, nodes = cluster
    path = tmp_path / "loss.yaml"
    path.write_text(LOSS)
    run_id = f"test-{tmp_path.name}"
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("run", ray_run(path, run_id, runs)), daemon=True)
    t.start()
    run = RunDir.new("ray-loss", run_id)
    deadline = time.monotonic() + 300
    home = run.arm("lost")
    while time.monotonic() < deadline:  # the sweep runs on node_b and some of its records came home
        try:
            arm = manifest(run)["arms"]["lost"]
        except (FileNotFoundError, KeyError, json.JSONDecodeError):
            arm = {}
        if arm.get("notebooks", {}).get("30_load_sweep", {}).get("status") == "running" \
                and home.engine_json.exists() and home.requests.exists() and home.requests.read_text().count("\n") >= 2:
            break
        time.sleep(0.5)
    else:
        raise AssertionError("the arm on node_b did not start its sweep")
    pid = json.loads(home.engine_json.read_text())["pid"]
    c.remove_node(nodes["node_b"], allow_graceful=False)
    t.join(300)
    assert not t.is_alive()
    m = manifest(run)
    lost, kept = m["arms"]["lost"], m["arms"]["kept"]
    assert lost["status"] == "node_lost", lost
    assert node_ids["node_b"] in lost["error"] and "--resume" in lost["error"]
    assert lost["notebooks"]["30_load_sweep"]["status"] == "failed"
    assert lost["placement"]["node_id"] == node_ids["node_b"]
    assert kept["status"] == "complete" and kept["placement"]["node_id"] == node_ids["node_a"], kept
    assert m["status"] == "incomplete"
    # what came home before the node was lost is kept: the engine record and whole request records
    assert home.engine_json.exists()
    lines = home.requests.read_text().splitlines()
    assert len(lines) >= 2 and all(json.loads(line) for line in lines[:-1])  # the last may be cut mid-write
    assert_gone(pid)  # the engine died with its node's worker
    import glob
    import shutil
    import tempfile
    # a node holding node_b again: --resume re-runs only what is missing, on it
    c.add_node(num_cpus=1, resources={"node_b": 1})
    c.wait_for_nodes()
    kept_span = kept["placement"]["started_unix"]
    ray_run(path, None, [], resume=str(run))
    m = manifest(run)
    assert m["status"] == "complete" and m["resumed"] == 1, json.dumps(m, indent=1)[:3000]
    assert m["arms"]["kept"]["placement"]["started_unix"] == kept_span  # not run again
    assert m["arms"]["lost"]["engine_starts"] == 2
    assert m["arms"]["lost"]["placement"]["node_id"] != node_ids["node_b"]
    latest = read_records(home.requests, latest_attempt=True)
    assert len([r for r in latest if r.phase == "measure" and r.ok]) == 12
    for staged in glob.glob(os.path.join(tempfile.gettempdir(), "stackbook-arm-*", "outputs", "ray-loss", run_id)):
        shutil.rmtree(staged.split("/outputs/")[0], ignore_errors=True)  # the lost node's staging left behind
