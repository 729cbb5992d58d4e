"""Campaigns past one machine, measured (issue 16, item 6).

(a) executors: the wall time of one campaign with two llama.cpp arms on the ray executor, each
    arm pinned to its own node of a local two-node cluster (`ray.cluster_utils.Cluster`, one CPU
    and one custom resource per node), against the same campaign on the local executor (the arms
    one after another). Both nodes live on this machine and share its cores, so the figure says
    what the placement and shipping cost and what overlap the cores allow here, not what two
    real machines would give.

Run: .venv/bin/python benchmarks/scale.py   (a few minutes; writes benchmarks/results/scale.json)
Nothing here is a pass/fail test; the numbers are what was measured, with the command.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from stackbook.host import cpu_model, isa_flags
from stackbook.locations import REPO_ROOT

CAMPAIGN = """
name: scale-executors
model: {source: embedded}
protocol:
  stages: [sweep]
  workload: {kind: synthetic, prompt_tokens: 64, output_tokens: 32}
  arrival: {kind: closed_loop, concurrency: [1]}
  context_length: 256
  requests_per_point: 16
  warmup_requests: 1
  canaries: {run_sweep_on_hold: true}
arms:
  - name: first
    engine: {kind: llama_cpp, threads: 1, parallel: 1}
    resources: {node_a: 1}
  - name: second
    engine: {kind: llama_cpp, threads: 1, parallel: 1}
    resources: {node_b: 1}
"""


NOTE = ("two llama.cpp arms (one thread each) on a local two-node Ray cluster on this host, against the same "
        "campaign on the local executor; both nodes share this host's cores with the engines, the load generators, "
        "Ray and any other work running at the time, so the ratio says what overlap this host allowed, not what "
        "two machines give")


def timed_run(path: Path, run_id: str, executor) -> dict:
    from stackbook.runner import run_campaign

    t = time.monotonic()
    run = run_campaign(str(path), run_id=run_id, progress=False, executor=executor)
    wall = time.monotonic() - t
    manifest = json.loads((REPO_ROOT / run.manifest).read_text())
    arms = {name: {"status": a["status"], "seconds": a.get("seconds"),
                   "node_id": (a.get("placement") or {}).get("node_id"),
                   "span_s": round(a["placement"]["finished_unix"] - a["placement"]["started_unix"], 1)
                   if (a.get("placement") or {}).get("finished_unix") else None}
            for name, a in manifest["arms"].items()}
    shutil.rmtree(REPO_ROOT / run.path, ignore_errors=True)
    try:
        (REPO_ROOT / run.path).parent.rmdir()
    except OSError:
        pass
    return {"wall_s": round(wall, 1), "status": manifest["status"], "analysis_s": manifest["analysis"].get("seconds"),
            "arms": arms}


def executors_wall_time() -> dict:
    import ray
    from ray.cluster_utils import Cluster

    from stackbook.executors import LocalExecutor
    from stackbook.executors.ray_cluster import RayExecutor

    path = Path(tempfile.mkdtemp()) / "scale.yaml"
    path.write_text(CAMPAIGN)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    local = timed_run(path, f"bench-local-{stamp}", LocalExecutor())
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT / "lib"), os.environ.get("PYTHONPATH")) if p)
    t = time.monotonic()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    ray.init(address=cluster.address, log_to_driver=False)  # attached to the head, which runs no arm
    cluster.add_node(num_cpus=1, resources={"node_a": 1})
    cluster.add_node(num_cpus=1, resources={"node_b": 1})
    cluster.wait_for_nodes()
    startup = time.monotonic() - t
    try:
        on_ray = timed_run(path, f"bench-ray-{stamp}", RayExecutor())
    finally:
        ray.shutdown()
        cluster.shutdown()
    return {"note": NOTE, "campaign": CAMPAIGN.strip(), "local": local, "ray_two_nodes": on_ray,
            "ray_cluster_startup_s": round(startup, 1),
            "ray_over_local_wall": round(on_ray["wall_s"] / local["wall_s"], 3)}


def main() -> None:
    os.chdir(REPO_ROOT)
    out = {"format": "stackbook-scale/1", "command": "benchmarks/scale.py",
           "measured_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "host": {"cpu": cpu_model(), "logical_cpus": os.cpu_count(), "isa_flags": isa_flags(),
                    "python": platform.python_version()},
           "executors": executors_wall_time()}
    dest = REPO_ROOT / "benchmarks" / "results" / "scale.json"
    dest.write_text(json.dumps(out, indent=2) + "\n")
    json.dump(out["executors"] | {"campaign": "..."}, sys.stdout, indent=2)
    print(f"\nwritten: {dest.relative_to(REPO_ROOT)}")


if __name__ == "__main__":
    main()
