"""The decision rule's false-alarm rate and power, by simulation, with and without setting an
odd load's spread apart (`stackbook.analysis.spread_pool`).

Each simulated comparison is the default design: two arms, three loads, R interleaved rounds
(R = 2, 3, 4), paired by round. The per-round log ratio at every load is the true log ratio plus
normal noise of sd `NOISE` (a run-to-run spread of about 3%, what a shared 2-core host shows on
the quickstart). Two scenarios: every load alike, and one repetition at the highest load shifted
by `OUTLIER` on the log scale (a cold cache or a busy neighbour in one round: +30%, the size of
the first-round outlier a three-arm endpoint campaign met). True ratios 1 (an A/A pair), 0.95,
0.90, 0.80; the rule at 95% with a 5% margin.

Reported per cell: how often the rule says "ahead" for the right arm (power) or for either arm
when the ratio is 1 (false alarm), at the loads without the outlier and at the outlier's load,
with the rule that pools every load (`pooling_level` 0) and the one that sets an odd load apart;
and how often the interval held the true ratio (at the outlier's load the truth was moved, so
there it is not the nominal coverage that counts). A true ratio of 0.95 sits on the margin: "ahead"
there is the rule's error at its boundary, nominally at most 2.5%.

Run: .venv/bin/python benchmarks/verdict_power.py [--sims 2000]
     (about a minute; writes benchmarks/results/verdict_power.json)
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

from stackbook.analysis.decision import AHEAD, COMPARED_BY_NAME, decide, paired_intervals
from stackbook.analysis.spread_pool import POOLING_TEST_LEVEL
from stackbook.host import cpu_model, isa_flags
from stackbook.locations import REPO_ROOT

OUT = REPO_ROOT / "benchmarks" / "results" / "verdict_power.json"
LOADS = (1, 2, 4)
ROUNDS = (2, 3, 4)
TRUE_RATIOS = (1.0, 0.95, 0.90, 0.80)
NOISE = 0.03
OUTLIER = math.log(1.30)
CONFIDENCE, MARGIN = 0.95, 0.05
RULES = {"pool every load": 0.0, "set an odd load apart": POOLING_TEST_LEVEL}
FIGURE = COMPARED_BY_NAME["tpot_p50"]


def simulate(rng, rounds: int, ratio: float, outlier: bool, level: float) -> dict:
    """One comparison: per load, whether the rule said the first arm (truly faster or equal) is
    ahead, whether it said either arm is, and whether the interval held the true ratio."""
    pairs = {}
    for load in LOADS:
        logs = math.log(ratio) + rng.normal(0.0, NOISE, rounds)
        if outlier and load == LOADS[-1]:
            logs[0] += OUTLIER
        pairs[load] = (list(np.exp(logs)), [1.0] * rounds)
    iv = paired_intervals(pairs, CONFIDENCE, pooling_level=level)
    out = {}
    for load in LOADS:
        d = decide(load, FIGURE, "a", "b", iv[load], (rounds, rounds), (0, 0), MARGIN, CONFIDENCE, "paired")
        held = d.lo is not None and d.lo <= ratio <= d.hi
        out[load] = (d.decision == AHEAD and d.leader == "a", d.decision == AHEAD, held)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sims", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=20261202)
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = []
    for outlier in (False, True):
        for rounds in ROUNDS:
            for ratio in TRUE_RATIOS:
                for rule, level in RULES.items():
                    rng = np.random.default_rng([args.seed, rounds, int(ratio * 100), outlier])
                    runs = [simulate(rng, rounds, ratio, outlier, level) for _ in range(args.sims)]
                    idx = 0 if ratio < 1 else 1  # power: the right arm ahead; A/A: any ranking
                    rate = {ld: sum(r[ld][idx] for r in runs) / args.sims for ld in LOADS}
                    held = {ld: sum(r[ld][2] for r in runs) / args.sims for ld in LOADS}
                    rows.append({"scenario": "one outlying repetition at load 4" if outlier else "loads alike",
                                 "rounds": rounds, "true_ratio": ratio,
                                 "what": "power (right arm ahead)" if ratio < 1 else "false alarm (any arm ahead)",
                                 "rule": rule, "rate_by_load": rate, "interval_held_truth_by_load": held,
                                 "mc_standard_error": round(math.sqrt(0.25 / args.sims), 4)})
                    print(f"{rows[-1]['scenario']:>36}  R={rounds}  ratio {ratio:.2f}  {rule:>22}: "
                          + "  ".join(f"c{ld} {rate[ld]:.3f}" for ld in LOADS)
                          + "  held " + " ".join(f"{held[ld]:.2f}" for ld in LOADS))
    result = {
        "what": __doc__.split("\n\n")[0],
        "design": {"loads": LOADS, "noise_sd_log": NOISE, "outlier_log_shift": OUTLIER,
                   "confidence": CONFIDENCE, "min_effect": MARGIN, "pooling_test_level": POOLING_TEST_LEVEL,
                   "sims_per_cell": args.sims, "seed": args.seed},
        "rows": rows,
        "seconds": round(time.perf_counter() - t0, 1),
        "command": "python benchmarks/verdict_power.py --sims %d" % args.sims,
        "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "host": {"cpu_model": cpu_model(), "logical_cpus": os.cpu_count(), "isa_flags": isa_flags(),
                 "python": platform.python_version(), "numpy": np.__version__},
    }
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(REPO_ROOT)} in {result['seconds']} s")


if __name__ == "__main__":
    main()
