"""What each request costs the product path after it was sent (issue 34, item 3).

One `openai_endpoint` arm in front of the calibration server (a zero-latency streaming instrument,
run as its own process; not an engine), `stages: [sweep]`, one constant-rate point of N requests.
`stackbook run` is timed end to end; the manifest's phase times say where the time went. The cost
after sending is the wall time less the point's window (its first send to its last byte, from the
records) and less the fixed cost (the same campaign with a point of `--base` requests), spread over
the extra requests sent (sentinel requests included: they are sent and recorded like the others):

    per request = (wall(N) - window(N) - median over runs of (wall(base) - window(base))) / (sent(N) - sent(base))

Run: .venv/bin/python benchmarks/request_cost.py [--requests 20000 200000] [--rate 1000]
     (about 8 minutes for the default points on a 2-core host; writes benchmarks/results/request_cost.json)
Nothing here is a pass/fail test; the numbers are what was measured, with the command.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from stackbook.harness.selftest import start_server
from stackbook.host import cpu_model, isa_flags
from stackbook.locations import REPO_ROOT

RESULTS = REPO_ROOT / "benchmarks" / "results" / "request_cost.json"

CAMPAIGN = """
name: request-cost
model: {{name: smollm2-135m-instruct, source: embedded}}
protocol:
  stages: [sweep]
  canaries: {{run_sweep_on_hold: true}}
  workload: {{kind: synthetic, prompt_tokens: 16, output_tokens: 4}}
  arrival: {{kind: constant, rates: [{rate}]}}
  context_length: 512
  requests_per_point: {n}
  repetitions: 1
  warmup_requests: 0
arms:
  - name: cal
    engine: {{kind: openai_endpoint, base_url: "{url}/v1", served_model: calibration}}
"""


def records_window(path: Path) -> tuple[int, float]:
    """The requests the point sent (its sentinels included) and the seconds from its first send to
    its last byte received, from its records."""
    first, last, n = float("inf"), 0.0, 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            n += 1
            first = min(first, r["sent_unix"])
            if r.get("end_s") is not None:
                last = max(last, r["sent_unix"] - r["sent_s"] + r["end_s"])
    return n, last - first


def one_run(n: int, rate: float, url: str, workdir: Path) -> dict:
    """`stackbook run` of a one-point campaign of n requests; its wall time and phase times."""
    path = workdir / f"cost-{n}.yaml"
    path.write_text(CAMPAIGN.format(n=n, rate=rate, url=url))
    run_id = f"bench-{n}-{os.getpid()}"
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "stackbook.cli", "run", str(path), "--run-id", run_id, "--no-progress"],
                       cwd=REPO_ROOT, capture_output=True, text=True)
    wall = time.monotonic() - t
    run_dir = REPO_ROOT / "outputs" / "request-cost" / run_id
    if r.returncode != 0:
        raise SystemExit(f"stackbook run failed ({r.returncode}); kept "
                         f"{run_dir}:\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    try:
        manifest = json.loads((run_dir / "manifest.json").read_text())
        sweep = json.loads((run_dir / "arms" / "cal" / "results.json").read_text())["sweep"]
        [point] = sweep["points"].values()
        sent, window = records_window(run_dir / "arms" / "cal" / "requests.jsonl")
        return {"requests": n, "rate_rps": rate, "returncode": r.returncode, "wall_s": round(wall, 1),
                "requests_sent": sent, "window_s": round(window, 2), "phase_seconds": manifest.get("phase_seconds"),
                "completed": point.get("completed"), "achieved_rate_rps": point.get("achieved_rate_rps"),
                "sweep_notebook_s": manifest["arms"]["cal"]["notebooks"]["30_load_sweep"]["seconds"]}
    finally:
        shutil.rmtree(run_dir.parent, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, nargs="+", default=[20_000, 200_000])
    ap.add_argument("--rate", type=float, default=1000.0, help="the constant rate of every point, req/s")
    ap.add_argument("--base", type=int, default=200, help="the small point that measures the fixed cost")
    ap.add_argument("--base-runs", type=int, default=3, help="runs of the small point (their median is the fixed cost)")
    a = ap.parse_args()
    server, url = start_server()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            bases = [one_run(a.base, a.rate, url, Path(tmp)) for _ in range(a.base_runs)]
            runs = [one_run(n, a.rate, url, Path(tmp)) for n in a.requests]
    finally:
        server.terminate()
        server.wait(30)
    fixed = statistics.median(b["wall_s"] - b["window_s"] for b in bases)
    base_sent = statistics.median(b["requests_sent"] for b in bases)
    for r in runs:
        r["after_sending_ms_per_request"] = round(1000 * (r["wall_s"] - r["window_s"] - fixed)
                                                  / (r["requests_sent"] - base_sent), 3)
    out = {"format": "stackbook-request-cost/1",
           "host": {"cpu": cpu_model(), "logical_cpus": os.cpu_count(), "isa_flags": isa_flags(),
                    "python": platform.python_version()},
           "command": "benchmarks/request_cost.py " + " ".join(sys.argv[1:]),
           "fixed_s": round(fixed, 2), "fixed_runs": bases, "runs": runs}
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    for r in runs:
        print(f"{r['requests']:>8,} requests at {r['rate_rps']:g} req/s: wall {r['wall_s']} s, "
              f"{r['after_sending_ms_per_request']} ms a request after sending (fixed {fixed:.1f} s)")


if __name__ == "__main__":
    main()
