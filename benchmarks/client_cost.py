"""What the client costs in CPU: the library's open loop against the product path.

Against the calibration server (zero-latency streaming, in its own process), at a constant
arrival rate, this measures the CPU seconds each process spends per 1,000 requests:

  (a) library: `run_open_loop` called from this plain Python process (no records written), and
      library+writers: the same with the record writer and the sent-body writer attached, as
      the sweep attaches them;
  (b) product: `stackbook run` on a one-arm campaign (an `openai_endpoint` arm pointed at the
      calibration server, stages [sweep], one open-loop point of the same size), with the CPU
      of every process read separately: the runner (papermill's parent), the notebook kernel
      (where the loop runs, on a worker thread) and the calibration server.

The product's per-1,000 figures are read over the point's own window (first send to last reply,
from the records) by sampling each process's CPU time every 0.1 s; `whole_run_cpu_s` gives each
process's CPU before, during and after the point (start-up and imports, the figures, the
analysis notebook's kernel, the report), which do not grow with the requests. The validity
figures (schedule lag p99, achieved rate, valid) are the sweep's own, from the run's
results.json. The run directory is deleted afterwards.

Run: .venv/bin/python benchmarks/client_cost.py --rates 300 600 1000 --requests 3000 --repeat 2
     (about six minutes; --paths picks library, library+writers, product; --json FILE keeps the figures)
Nothing here is a pass/fail test; the numbers are what was measured on this host, with whatever
else it was running at the time.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import psutil

from stackbook.harness.selftest import start_server
from stackbook.host import cpu_model, isa_flags
from stackbook.locations import REPO_ROOT
from stackbook.measure.metric_definitions import rate_rps, schedule_lag_ms
from stackbook.measure.validity import MAX_SCHEDULE_LAG_MS

CAMPAIGN = "client-cost"
PROMPT_TOKENS, OUTPUT_TOKENS = 32, 16


def campaign_yaml(url: str, rate: float, n: int) -> str:
    return f"""
name: {CAMPAIGN}
model: {{name: calibration, source: remote}}
protocol:
  decoding: {{preset: greedy, seed: 0}}
  workload: {{kind: synthetic, prompt_tokens: {PROMPT_TOKENS}, output_tokens: {OUTPUT_TOKENS}}}
  arrival: {{kind: constant, rates: [{rate:g}]}}
  context_length: 4096
  requests_per_point: {n}
  warmup_requests: 10
  stages: [sweep]
  canaries: {{run_sweep_on_hold: true}}
arms:
  - name: calibration
    engine: {{kind: openai_endpoint, base_url: {url}/v1, exact_length: never}}
"""


def error_counts(recs) -> dict:
    return dict(Counter(r.error_class for r in recs if not r.ok))


def validity(lags_ms: list[float], sends: list[float]) -> dict:
    achieved = rate_rps(sends)
    return {"lag_p99_ms": round(float(np.percentile(lags_ms, 99)), 2), "achieved_rps": round(achieved, 1)}


def library(url: str, rate: float, n: int, writers: bool) -> dict:
    from stackbook.config.loading import load_campaign
    from stackbook.loadgen.arrivals import constant_schedule
    from stackbook.loadgen.drivers import Target, run_open_loop
    from stackbook.loadgen.records import RecordWriter
    from stackbook.loadgen.sent import SentWriter
    from stackbook.loadgen.workload import ApproximateTokenizer, synthetic_prompts

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.yaml"
        path.write_text(campaign_yaml(url, rate, n))
        protocol = load_campaign(str(path)).protocol
        tok = ApproximateTokenizer()
        prompts = synthetic_prompts(protocol.workload, tok, n + 20, seed=0)
        target = Target(url, "calibration", {"temperature": 0.0}, {"max_tokens": OUTPUT_TOKENS}, timeout_s=60)
        base = {"run_id": "client-cost", "arm": "calibration", "point": f"rate{rate:g}-r0", "concurrency": 0}
        kwargs = {"schedule": constant_schedule(rate, len(prompts)), "warmup": 10, "cooldown": 10, "base": base}
        cpu0, wall0 = time.process_time(), time.perf_counter()
        if writers:
            with RecordWriter(Path(tmp) / "requests.jsonl") as w, SentWriter(Path(tmp) / "sent.jsonl.gz") as s:
                target.on_send = s.write
                recs = run_open_loop(target, prompts, tok, writer=w, **kwargs)
        else:
            recs = run_open_loop(target, prompts, tok, writer=None, **kwargs)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    out = {"client_cpu_s_per_1k": round(cpu / len(recs) * 1000, 2), "wall_s": round(wall, 1),
           "errors": error_counts(recs)}
    out.update(validity([schedule_lag_ms(r) for r in recs], [r.sent_s for r in recs]))
    return out


class CpuSampler:
    """Every 0.1 s, the CPU seconds (user + system) of a process and all its descendants."""

    def __init__(self, root: int):
        self.root, self.samples, self._stop = root, [], threading.Event()
        self.names: dict[int, str] = {}
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        root = psutil.Process(self.root)
        while not self._stop.is_set():
            now, cpu = time.time(), {}
            try:
                procs = [root] + root.children(recursive=True)
            except psutil.Error:
                break
            for p in procs:
                try:
                    t = p.cpu_times()
                    cpu[p.pid] = t.user + t.system
                    if p.pid not in self.names:
                        self.names[p.pid] = " ".join(p.cmdline()[:4])
                except psutil.Error:
                    pass
            self.samples.append((now, cpu))
            self._stop.wait(0.1)

    def start(self):
        self._t.start()
        return self

    def stop(self):
        self._stop.set()
        self._t.join()

    def window(self, pid: int, t0: float, t1: float) -> float | None:
        """CPU seconds of `pid` between the samples nearest before t0 and after t1."""
        seen = [(t, c[pid]) for t, c in self.samples if pid in c]
        before = [c for t, c in seen if t <= t0]
        after = [c for t, c in seen if t >= t1]
        if not before or not after:
            return None
        return after[0] - before[-1]


def role(cmdline: str) -> str:
    if "ipykernel" in cmdline:
        return "kernel"
    return cmdline


def product(url: str, rate: float, n: int, server_pid: int) -> dict:
    """`stackbook run` on a one-arm campaign; CPU per process over the point's window."""
    from stackbook.evidence.rundir import RunDir
    from stackbook.loadgen.records import read_records

    run_id = f"cost-{int(time.time())}"
    run_root = REPO_ROOT / "outputs" / CAMPAIGN
    existed = run_root.exists()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{CAMPAIGN}.yaml"
        path.write_text(campaign_yaml(url, rate, n))
        server = CpuSampler(server_pid).start()
        proc = subprocess.Popen([sys.executable, "-m", "stackbook.cli", "run", str(path), "--run-id", run_id],
                                cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        sampler = CpuSampler(proc.pid).start()
        _, err = proc.communicate()
        sampler.stop()
        server.stop()
    run_dir = run_root / run_id
    try:
        if proc.returncode != 0:
            raise RuntimeError(f"stackbook run failed ({proc.returncode}): {err[-2000:]}")
        arm = RunDir.existing(run_dir).arm("calibration")
        recs = read_records(arm.requests)
        t0 = min(r.sent_unix for r in recs)
        t1 = max(r.sent_unix - r.sent_s + r.end_s for r in recs)
        results = json.loads(arm.results.read_text())
        point = next(iter(results["sweep"]["points"].values()))
        lv = next(iter(results["sweep"]["load_validity"].values()))
        per_process = {}
        for pid, name in sampler.names.items():
            cpu = sampler.window(pid, t0, t1)
            if cpu is not None and (cpu > 0.01 or pid == proc.pid):
                label = "runner (papermill parent)" if pid == proc.pid else role(name)
                per_process[label] = round(per_process.get(label, 0) + cpu / len(recs) * 1000, 2)
        # Each process over the whole run: its CPU before the point, during it and after it.
        whole = {}
        for pid, name in sampler.names.items():
            seen = [(t, c[pid]) for t, c in sampler.samples if pid in c]
            if not seen or (seen[-1][1] < 0.05 and pid != proc.pid):
                continue
            label = "runner (papermill parent)" if pid == proc.pid else f"{role(name)} {pid}"
            before = max([c for t, c in seen if t <= t0], default=0.0)
            during = sampler.window(pid, t0, t1) or 0.0
            whole[label] = {"alive_s": [round(seen[0][0] - t0, 1), round(seen[-1][0] - t0, 1)],
                            "before_point": round(before, 2), "during_point": round(during, 2),
                            "after_point": round(seen[-1][1] - before - during, 2)}
        srv = server.window(server_pid, t0, t1)
        out = {"per_process_cpu_s_per_1k": per_process,
               "whole_run_cpu_s": whole,
               "server_cpu_s_per_1k": round(srv / len(recs) * 1000, 2) if srv is not None else None,
               # The sweep's own reading: client CPU from the first send to the last reply, over
               # the requests that completed.
               "sweep_client_cpu_s_per_1k": round(1000 * point["cpu_seconds"]["client"]
                                                  / max(1, point["requests_in_cpu_window"]), 2),
               "window_s": round(t1 - t0, 1), "requests": len(recs),
               "load_validity": lv, "achieved_rate_rps": point.get("achieved_rate_rps"),
               "errors": error_counts(recs)}
        lags = [schedule_lag_ms(r) for r in recs]
        out.update(validity(lags, [r.sent_s for r in recs]))
        return out
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
        if not existed:
            shutil.rmtree(run_root, ignore_errors=True)


def table(results: list[dict]) -> str:
    """One line per rate and path: client CPU s per 1,000 requests and schedule lag p99, each run."""
    rows = {}
    for r in results:
        cpu = r.get("client_cpu_s_per_1k") or r["per_process_cpu_s_per_1k"].get("kernel")
        runner = r.get("per_process_cpu_s_per_1k", {}).get("runner (papermill parent)")
        cell = f"{cpu:.2f}" + (f" (+runner {runner:.2f})" if runner is not None else "")
        if "whole_run_cpu_s" in r:
            whole = sum(sum(v[k] for k in ("before_point", "during_point", "after_point"))
                        for v in r["whole_run_cpu_s"].values())
            cell += f", whole run {whole:.1f} s"
        valid = r.get("load_validity", {}).get("valid", r["lag_p99_ms"] <= MAX_SCHEDULE_LAG_MS)
        rows.setdefault((r["rate_rps"], r["path"]), []).append(f"{cell}, lag p99 {r['lag_p99_ms']:.1f} ms"
                                                               f"{'' if valid else ' NOT HELD'}")
    return "\n".join(f"{rate:>6g} req/s  {path:<16} " + " | ".join(v) for (rate, path), v in rows.items())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", type=float, nargs="+", default=[300, 600])
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--paths", nargs="+", default=["library", "library+writers", "product"],
                    choices=["library", "library+writers", "product"])
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    proc, url = start_server()
    results = []
    try:
        for rate in args.rates:
            for path in args.paths:
                for rep in range(args.repeat):
                    s0 = psutil.Process(proc.pid).cpu_times()
                    if path == "product":
                        r = product(url, rate, args.requests, proc.pid)
                    else:
                        r = library(url, rate, args.requests, writers=path == "library+writers")
                        s1 = psutil.Process(proc.pid).cpu_times()
                        r["server_cpu_s_per_1k"] = round((s1.user + s1.system - s0.user - s0.system)
                                                         / (args.requests + 20) * 1000, 2)
                    r = {"rate_rps": rate, "path": path, "repeat": rep, **r}
                    print(json.dumps(r), flush=True)
                    results.append(r)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps({
            "command": "benchmarks/client_cost.py " + " ".join(sys.argv[1:]),
            "measured_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "host": {"cpu": cpu_model(), "logical_cpus": os.cpu_count(), "isa_flags": isa_flags()},
            "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
