"""The capacity search against a capacity known beforehand, and against a fixed ladder.

Each run draws a knee scheduler (harness.knee_scheduler: max batch B in {8, 16, 32, 64}, step
t0 + t1*b with t0 in 5..20 ms and t1 in 0.1..1 ms, output lengths 32, 64 or 128 tokens +-50%)
and an SLO: in a quarter of the runs a TPOT bound between two step times below the knee, in the
rest a TTFT bound of the step time plus 2 to 15 mean departure gaps past the knee (with a TPOT
bound 20% over the step at B). Its true capacity (harness.knee_truth: the highest concurrency
whose steady-state attainment is at least 95%, from 20,000 simulated requests per concurrency
past the knee) is computed first; then, for each plan, the search, the full ladder at the same
resolution and the ladder that stops at its first rung outside run on the simulated scheduler,
each probe a seeded closed loop of 200 measured requests (re-probed with 400 and 800 while
undecided) judged by the attainment rule (capacity.verdict, 95% Wilson bounds). A run is a hit
when the interval is resolved (its width within the tolerance) and holds the truth
(lower <= truth < upper). Time is the probes' simulated seconds, summed.

Run: .venv/bin/python benchmarks/capacity_search.py --runs 50 --json benchmarks/results/capacity_search.json
     (about a minute on 2 cores; nothing is sent over a network)
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from stackbook.capacity.ladder import run_ladder
from stackbook.capacity.probing import CapacityInterval, SearchPlan
from stackbook.capacity.search import search_capacity
from stackbook.capacity.simulated import KneeProbe
from stackbook.harness.knee_scheduler import Knee, Lengths, SloBounds
from stackbook.harness.knee_truth import true_capacity
from stackbook.host import cpu_model, isa_flags

TARGET = 0.95
PLANS = {  # name: (start, tolerance); the first is the headline
    "start 4, tolerance 4": (4, 4),
    "start 1, tolerance 4": (1, 4),
    "start 4, tolerance 2": (4, 2),
}


@dataclass(frozen=True)
class Scenario:
    knee: Knee
    lengths: Lengths
    slo: SloBounds
    binds: str  # which bound sets the capacity: below or past the knee


def scenario(seed: int) -> Scenario:
    r = random.Random(seed)
    knee = Knee(max_batch=r.choice([8, 16, 32, 64]), t0_ms=round(r.uniform(5, 20), 2),
                t1_ms=round(r.uniform(0.1, 1.0), 3))
    lengths = Lengths(r.choice([32, 64, 128]), 0.5)
    step_b = knee.step_s(knee.max_batch)
    if r.random() < 0.25:
        b = r.randint(max(1, knee.max_batch // 4), knee.max_batch - 1)
        return Scenario(knee, lengths, SloBounds(tpot_s=(knee.step_s(b) + knee.step_s(b + 1)) / 2), "below the knee")
    gaps = r.uniform(2, 15)  # mean departure gaps past the knee: lengths.mean * step_b / B each
    slo = SloBounds(ttft_s=step_b + gaps * lengths.mean * step_b / knee.max_batch, tpot_s=1.2 * step_b)
    return Scenario(knee, lengths, slo, "past the knee")


def summary(r: CapacityInterval, truth: int) -> dict:
    return {"lower": r.lower, "upper": r.upper, "resolved": r.resolved, "holds": r.holds(truth),
            "hit": r.resolved and r.holds(truth), "probes": len(r.probes), "time_s": round(r.duration_s, 1),
            "requests": r.requests, "stop_reason": r.stop_reason}


def one_run(seed: int) -> dict:
    s = scenario(seed)
    truth = true_capacity(s.knee, s.slo, TARGET, s.lengths)
    at, above = truth.margin()
    out = {"seed": seed, "knee": s.knee.model_dump(exclude={"admit_window_ms"}), "mean_output_tokens": s.lengths.mean,
           "slo": {"ttft_s": s.slo.ttft_s, "tpot_s": s.slo.tpot_s}, "binds": s.binds, "truth": truth.capacity,
           "attainment_at_truth": at, "attainment_above_truth": above, "plans": {}}
    for name, (start, tol) in PLANS.items():
        plan = SearchPlan(start=start, tolerance=tol, max_load=4 * s.knee.max_batch, requests=200, max_requests=800,
                          max_probes=10_000)  # no budget binds: the full ladder runs every rung

        def probe():
            return KneeProbe(s.knee, s.slo, TARGET, s.lengths, seed)
        out["plans"][name] = {"search": summary(search_capacity(probe(), plan), truth.capacity),
                              "ladder": summary(run_ladder(probe(), plan), truth.capacity),
                              "ladder_early_exit": summary(run_ladder(probe(), plan, True), truth.capacity)}
    return out


def aggregate(runs: list[dict], name: str) -> dict:
    def col(kind, key):
        return [r["plans"][name][kind][key] for r in runs]
    agg = {}
    for kind in ("search", "ladder", "ladder_early_exit"):
        agg[kind] = {"hit_rate": statistics.mean(col(kind, "hit")), "holds_rate": statistics.mean(col(kind, "holds")),
                     "resolved_rate": statistics.mean(col(kind, "resolved")),
                     "probes_mean": round(statistics.mean(col(kind, "probes")), 2),
                     "time_s_mean": round(statistics.mean(col(kind, "time_s")), 1)}
    for base in ("ladder", "ladder_early_exit"):
        agg[f"search_over_{base}"] = {
            "probes": round(agg["search"]["probes_mean"] / agg[base]["probes_mean"], 3),
            "time": round(agg["search"]["time_s_mean"] / agg[base]["time_s_mean"], 3)}
    agg["goals"] = {"hit_rate_at_least_0.9": agg["search"]["hit_rate"] >= 0.9,
                    "probes_at_most_half_the_ladder": agg["search_over_ladder"]["probes"] <= 0.5,
                    "time_at_most_half_the_ladder": agg["search_over_ladder"]["time"] <= 0.5}
    agg["misses"] = [{"seed": r["seed"], "truth": r["truth"], "attainment_at_truth": r["attainment_at_truth"],
                      "attainment_above_truth": r["attainment_above_truth"],
                      **{k: r["plans"][name]["search"][k] for k in ("lower", "upper", "stop_reason")}}
                     for r in runs if not r["plans"][name]["search"]["hit"]]
    return agg


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    a = ap.parse_args()
    began = time.perf_counter()
    runs = [one_run(seed) for seed in range(a.runs)]
    result = {
        "format": "stackbook-capacity-search/1",
        "command": " ".join([".venv/bin/python", "benchmarks/capacity_search.py", *sys.argv[1:]]),
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": {"cpu_model": cpu_model(), "isa_flags": isa_flags(), "cpus": os.cpu_count(),
                 "python": platform.python_version()},
        "elapsed_s": None,
        "method": {"target_attainment": TARGET, "verdict": "95% Wilson bounds on the share meeting the SLO",
                   "requests_per_probe": 200, "max_requests_per_probe": 800, "max_load": "4 x max batch",
                   "hit": "resolved (width within the tolerance) and lower <= truth < upper",
                   "time": "sum of the probes' simulated seconds"},
        "plans": {name: {"start": s, "tolerance": t, **aggregate(runs, name)} for name, (s, t) in PLANS.items()},
        "truths": {"min": min(r["truth"] for r in runs), "max": max(r["truth"] for r in runs),
                   "below_the_knee": sum(r["binds"] == "below the knee" for r in runs),
                   "near_target": sum(1 for r in runs if r["attainment_at_truth"] < 0.96
                                      or (r["attainment_above_truth"] or 0) > 0.94)},
        "runs": runs,
    }
    result["elapsed_s"] = round(time.perf_counter() - began, 1)
    for name, p in result["plans"].items():
        s, lad, early = p["search"], p["ladder"], p["ladder_early_exit"]
        print(f"{name}: search hit {s['hit_rate']:.0%}, {s['probes_mean']} probes, {s['time_s_mean']} s | "
              f"ladder hit {lad['hit_rate']:.0%}, {lad['probes_mean']} probes, {lad['time_s_mean']} s | "
              f"early-exit ladder hit {early['hit_rate']:.0%}, {early['probes_mean']} probes, {early['time_s_mean']} s "
              f"| search/ladder probes {p['search_over_ladder']['probes']}, time {p['search_over_ladder']['time']}")
    print(f"truths {result['truths']}, {result['elapsed_s']} s")
    if a.json:  # one line per run, so the file reads (and diffs) run by run
        runs_text = ",\n".join("  " + json.dumps(r) for r in result.pop("runs"))
        head = json.dumps(result, indent=1)
        a.json.write_text(head[:-2] + ',\n "runs": [\n' + runs_text + "\n ]\n}\n")


if __name__ == "__main__":
    main()
