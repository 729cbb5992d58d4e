"""Campaigns past one machine, measured (issue 16, item 6).

(a) executors: the wall time of one campaign with two llama.cpp arms on the ray executor, each
    arm pinned to its own node of a local two-node cluster (`ray.cluster_utils.Cluster`, one CPU
    and one custom resource per node), against the same campaign on the local executor (the arms
    one after another). Both nodes live on this machine and share its cores, so the figure says
    what the placement and shipping cost and what overlap the cores allow here, not what two
    real machines would give.
(b) clients: the highest constant rate held from 1 and from 2 client processes against the
    calibration server (a zero-latency streaming instrument, not an engine), by the sweep's own
    rule (p99 schedule lag <= 5 ms, achieved rate within 5% of the schedule, no request failed):
    through the library's open loop (`selftest.rate_ladder`) and through the product path
    (`stackbook run` of a campaign with one `openai_endpoint` arm, `protocol.loadgen.processes`
    1 or 2, one constant-rate point per rung, the notebooks executed by papermill), each rung
    three times, the two paths' passes interleaved. The server and the clients share this host's
    cores: two client processes leave the server less.

Run: .venv/bin/python benchmarks/scale.py [--part executors|clients|all]
     (a few minutes each; updates that part of benchmarks/results/scale.json)
Nothing here is a pass/fail test; the numbers are what was measured, with the command.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
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


def remove_run(run) -> None:
    """A benchmark's run directory, and its campaign folder once empty: nothing is left in outputs/."""
    shutil.rmtree(REPO_ROOT / run.path, ignore_errors=True)
    try:
        (REPO_ROOT / run.path).parent.rmdir()
    except OSError:
        pass


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
    remove_run(run)
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


LADDER = [250, 500, 1000, 1500, 2000, 3000, 4000]  # offered constant rates, req/s
LADDER_SECONDS = 3.0  # each pass of a library rung sends this long
PASSES = 3  # passes per rung: one pass's p99 lag on a shared 2-core host swings from 1 to 20 ms
PRODUCT_REQUESTS = 1500  # requests per point on the product path (its points have a fixed count)

CLIENTS_CAMPAIGN = """
name: scale-clients
model: {{name: calibration, source: remote}}
protocol:
  stages: [sweep]
  canaries: {{run_sweep_on_hold: true}}
  workload: {{kind: synthetic, prompt_tokens: 16, output_tokens: 16}}
  arrival: {{kind: constant, rates: [{rate}]}}
  context_length: 512
  requests_per_point: {requests}
  warmup_requests: 10
  loadgen: {{processes: {processes}}}
arms:
  - name: calibration
    engine: {{kind: openai_endpoint, base_url: "{url}/v1", served_model: calibration}}
"""


def product_rung(url: str, rate: float, processes: int, stamp: str) -> dict:
    """One constant-rate point through `stackbook run`: the sweep's own verdict on it, and the
    CPU seconds of each client process over the point."""
    from stackbook.runner import run_campaign

    path = Path(tempfile.mkdtemp()) / "clients.yaml"
    path.write_text(CLIENTS_CAMPAIGN.format(rate=rate, requests=PRODUCT_REQUESTS, processes=processes, url=url))
    run = run_campaign(str(path), run_id=f"bench-clients-{processes}p-{rate}-{stamp}", progress=False)
    try:
        results = json.loads(run.arm("calibration").results.read_text())
        name, point = next(iter(results["sweep"]["points"].items()))
        valid = results["sweep"]["load_validity"][name]
        failed = point["requests"] - point["completed"]
        return {"rate_rps": rate, "processes": processes, "achieved_rps": round(point["achieved_rate_rps"], 1),
                "scheduled_rps": round(point["scheduled_rate_rps"], 1),
                "lag_p99_ms": round(point["schedule_lag_ms_p99"], 3),
                "ttft_p99_ms": point.get("ttft_ms_p99"), "errors": failed,
                "client_cpu_fraction_by_process": point.get("client_cpu_fraction_by_process"),
                "client_cpu_s_per_1000_requests": round(1000 * point["cpu_seconds"]["client"]
                                                        / max(1, point["requests_in_cpu_window"]), 2),
                "held": bool(valid["valid"]) and failed == 0}
    finally:
        remove_run(run)


def clients_ceiling() -> dict:
    """Each rung PASSES times, the library's pass and the product path's side by side so both
    see the same moment of this host; a rung is held where most of its passes held, and each
    ladder stops at its first rung not held."""
    from stackbook.harness.selftest import rate_ladder, start_server

    proc, url = start_server()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out: dict = {"note": "constant arrivals against the calibration server on this host; the server and the "
                         "client processes share its cores",
                 "held_rule": "p99 schedule lag <= 5 ms, achieved rate within 5% of the schedule's, no request "
                              f"failed, in at least {PASSES // 2 + 1} of {PASSES} passes",
                 "ladder_rps": LADDER, "passes": PASSES, "library": {}, "product_path": {}}
    try:
        for processes in (1, 2):
            key = f"{processes}_process"
            ladders = {"library": {"highest_rate_held_rps": 0, "rungs": []},
                       "product_path": {"highest_rate_held_rps": 0, "rungs": []}}
            climbing = {"library", "product_path"}
            for rate in LADDER:
                passes: dict[str, list] = {path: [] for path in climbing}
                for _ in range(PASSES):
                    if "library" in climbing:
                        passes["library"] += rate_ladder(url, [rate], processes=processes, arrivals="constant",
                                                         seconds=LADDER_SECONDS)[1]
                    if "product_path" in climbing:
                        passes["product_path"].append(product_rung(url, rate, processes, stamp))
                for path, runs in passes.items():
                    held = sum(r["held"] for r in runs) > PASSES // 2
                    ladders[path]["rungs"].append({"rate_rps": rate, "held": held,
                                                   "lag_p99_ms": [r["lag_p99_ms"] for r in runs], "passes": runs})
                    if held:
                        ladders[path]["highest_rate_held_rps"] = rate
                    else:
                        climbing.discard(path)
                if not climbing:
                    break
            for path, ladder in ladders.items():
                out[path][key] = ladder
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["executors", "clients", "all"], default="all")
    part = parser.parse_args().part
    os.chdir(REPO_ROOT)
    dest = REPO_ROOT / "benchmarks" / "results" / "scale.json"
    out = json.loads(dest.read_text()) if dest.exists() else {}
    out |= {"format": "stackbook-scale/1",
            "host": {"cpu": cpu_model(), "logical_cpus": os.cpu_count(), "isa_flags": isa_flags(),
                     "python": platform.python_version()}}
    if part in ("executors", "all"):
        out["executors"] = executors_wall_time() | {
            "command": "benchmarks/scale.py --part executors",
            "measured_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if part in ("clients", "all"):
        out["clients"] = clients_ceiling() | {
            "command": "benchmarks/scale.py --part clients",
            "measured_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    dest.write_text(json.dumps(out, indent=2) + "\n")
    for key in ("executors", "clients"):
        if key in out and part in (key, "all"):
            shown = {k: v for k, v in out[key].items() if k != "campaign"}
            json.dump(shown, sys.stdout, indent=2)
    print(f"\nwritten: {dest.relative_to(REPO_ROOT)}")


if __name__ == "__main__":
    main()
