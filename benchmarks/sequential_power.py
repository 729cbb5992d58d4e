"""What sequential rounds buy: the decision rule's power, false-alarm rate and rounds spent under
fixed and sequential repetition plans, by simulation.

Each simulated comparison is two arms at three loads, paired by round, with the library's own
rule (`analysis.decision.paired_intervals` and `decide`, the spread pooled where the data allow).
The per-round log ratio at every load is the true log ratio plus normal noise of sd `noise`
(0.03: what a shared 2-core host shows on the quickstart; 0.06: the A/A control's noisier
host). A fixed plan looks once, after its rounds, at 95%. A sequential plan (min to max) looks
after every round from min on, each look at 95% split over the looks it may take (Bonferroni, as
`Repetitions.looks` preregisters it), and stops once every load is decided (ahead or no
difference); its answer is the last look's.

Reported per cell: how often the right arm was ranked ahead (power; averaged over the loads),
how often any arm was ranked for a true ratio of 1 (false alarm), how often the interval held
the truth, and the mean rounds run. A true ratio of 0.95 sits on the 5% margin.

With `--from-run RUN_DIR --pair A B --figure tpot_p50` the noise is not assumed but measured: the
sd of the per-round log ratios of the A/A pair A, B on that figure, pooled over the run's loads
(outputs/known-effect/reference measures it on this host), and the curve is drawn at that noise.

Run: .venv/bin/python benchmarks/sequential_power.py [--sims 1000]
     (a few minutes; writes benchmarks/results/sequential_power.json)
     .venv/bin/python benchmarks/sequential_power.py --from-run outputs/known-effect/reference \
         --pair fast fast-again --figure tpot_p50   (writes sequential_power_measured.json)
Nothing here is a pass/fail test; the numbers are what was simulated, with the command.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from datetime import datetime, timezone

import numpy as np

from stackbook.analysis.decision import AHEAD, COMPARED_BY_NAME, UNDECIDED, decide, look_confidence, paired_intervals
from stackbook.host import cpu_model, isa_flags
from stackbook.locations import REPO_ROOT

OUT = REPO_ROOT / "benchmarks" / "results" / "sequential_power.json"
LOADS = (1, 2, 4)
PLANS = {"fixed 2": (2, 2), "fixed 3": (3, 3), "fixed 4": (4, 4),
         "sequential 2 to 3": (2, 3), "sequential 2 to 4": (2, 4), "sequential 3 to 6": (3, 6)}
TRUE_RATIOS = (1.0, 0.95, 0.93, 0.90, 0.85, 0.80)
NOISES = (0.03, 0.06)
CONFIDENCE, MARGIN = 0.95, 0.05
FIGURE = COMPARED_BY_NAME["tpot_p50"]


def look(logs: np.ndarray, rounds: int, confidence: float) -> dict:
    """The rule after `rounds` rounds: per load, its decision."""
    pairs = {ld: (list(np.exp(logs[i, :rounds])), [1.0] * rounds) for i, ld in enumerate(LOADS)}
    iv = paired_intervals(pairs, confidence)
    return {ld: decide(ld, FIGURE, "a", "b", iv[ld], (rounds, rounds), (0, 0), MARGIN, confidence, "paired")
            for ld in LOADS}


def simulate(rng, plan: tuple[int, int], ratio: float, noise: float) -> tuple[dict, int]:
    """One comparison under a plan: the final decisions per load and the rounds it ran."""
    lo, hi = plan
    logs = math.log(ratio) + rng.normal(0.0, noise, (len(LOADS), hi))
    conf = look_confidence(CONFIDENCE, hi - lo + 1)
    for rounds in range(lo, hi + 1):
        found = look(logs, rounds, conf)
        if all(d.decision != UNDECIDED for d in found.values()):
            break
    return found, rounds


def measured_noise(run_dir: str, a: str, b: str, figure: str) -> dict:
    """The sd of an A/A pair's per-round log ratios on one figure, pooled over the run's loads
    (ranked points only)."""
    from stackbook.analysis.comparison import comparison_frame, fairness_table
    from stackbook.analysis.run_data import load_run
    from stackbook.analysis.verdict import rankable

    campaign, arms = load_run(run_dir)
    df = rankable(comparison_frame(arms, fairness_table(campaign, arms)))
    column = COMPARED_BY_NAME[figure].column
    ss, dof = 0.0, 0
    for _, g in df[df["arm"].isin([a, b])].groupby("load"):
        wide = g.pivot_table(index="repetition", columns="arm", values=column).dropna()
        if len(wide) < 2 or a not in wide or b not in wide:
            continue
        logs = np.log(wide[a] / wide[b])
        ss += float(((logs - logs.mean()) ** 2).sum())
        dof += len(logs) - 1
    if not dof:
        raise SystemExit(f"{run_dir}: no load where {a} and {b} both ran two or more rounds")
    return {"run": run_dir, "pair": [a, b], "figure": figure, "sd_log": round(math.sqrt(ss / dof), 4),
            "degrees_of_freedom": dof}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sims", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--from-run", default=None)
    ap.add_argument("--pair", nargs=2, default=None)
    ap.add_argument("--figure", default="tpot_p50")
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = []
    noises, measured, out = NOISES, None, OUT
    if args.from_run:
        measured = measured_noise(args.from_run, *args.pair, args.figure)
        noises, out = (measured["sd_log"],), OUT.with_name("sequential_power_measured.json")
        print(f"measured noise: {measured}")
    for noise in noises:
        for ratio in TRUE_RATIOS:
            for name, plan in PLANS.items():
                rng = np.random.default_rng([args.seed, int(noise * 1000), int(ratio * 100)])
                ahead = right = held = rounds_run = 0
                for _ in range(args.sims):
                    found, rounds = simulate(rng, plan, ratio, noise)
                    rounds_run += rounds
                    for d in found.values():
                        ahead += d.decision == AHEAD
                        right += d.decision == AHEAD and d.leader == "a"
                        held += d.lo is not None and d.lo <= ratio <= d.hi
                n = args.sims * len(LOADS)
                rows.append({"noise_sd_log": noise, "true_ratio": ratio, "plan": name, "min": plan[0], "max": plan[1],
                             "what": "power (right arm ahead)" if ratio < 1 else "false alarm (any arm ahead)",
                             "rate": round((right if ratio < 1 else ahead) / n, 4),
                             "interval_held_truth": round(held / n, 4),
                             "mean_rounds": round(rounds_run / args.sims, 2)})
                r = rows[-1]
                print(f"noise {noise:.2f}  ratio {ratio:.2f}  {name:>18}: {r['what'][:11]} {r['rate']:.3f}  "
                      f"held {r['interval_held_truth']:.3f}  rounds {r['mean_rounds']:.2f}")
    result = {
        "what": __doc__.split("\n\n")[0],
        "measured_noise": measured,
        "design": {"loads": LOADS, "plans": PLANS, "confidence": CONFIDENCE, "min_effect": MARGIN,
                   "sims_per_cell": args.sims, "seed": args.seed,
                   "mc_standard_error_of_a_rate": round(math.sqrt(0.25 / (args.sims * len(LOADS))), 4)},
        "rows": rows,
        "seconds": round(time.perf_counter() - t0, 1),
        "command": "python benchmarks/sequential_power.py --sims %d" % args.sims + (
            f" --from-run {args.from_run} --pair {' '.join(args.pair)} --figure {args.figure}" if args.from_run
            else ""),
        "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "host": {"cpu_model": cpu_model(), "logical_cpus": os.cpu_count(), "isa_flags": isa_flags(),
                 "python": platform.python_version(), "numpy": np.__version__},
    }
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out.relative_to(REPO_ROOT)} in {result['seconds']} s")


if __name__ == "__main__":
    main()
