"""How often the SLO intervals of `stackbook.measure.slo_bounds` hold the truth, by simulation.

For n = 20, 100 and 400 requests, many seeded simulated points draw latencies from two known
distributions (lognormal and exponential), so every true percentile and every true attainment is
known exactly. Per point:

* the 95% order-statistic interval of p50, p95 and p99 (`quantile_interval_ranks`): covered when
  the true percentile lies between the two order statistics (a side the sample cannot bound is
  open, and the result says so);
* the 95% Clopper-Pearson and Wilson intervals of attainment against an SLO bound placed at the
  true 50th, 90th, 95th and 99th percentile (true attainment 0.50, 0.90, 0.95, 0.99): covered when
  the interval holds it;
* the percentile claim at 95% with the bound at the true percentile itself, where "p <= bound"
  and "p > bound" are both as close to false as a continuous distribution allows: how often the
  rule still says 'inside' or 'outside' (each should stay at or below 5%).

Each figure comes with its Monte Carlo standard error and, for the order-statistic intervals, the
exact coverage the binomial gives (the interval is distribution-free, so the simulation checks
the arithmetic, not a model).

Run: .venv/bin/python benchmarks/percentile_coverage.py [--points 20000]
     (seconds; writes benchmarks/results/percentile_coverage.json)
Nothing here is a pass/fail test; the numbers are what was simulated, with the command.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from datetime import datetime, timezone

import numpy as np
from scipy import stats

from stackbook.host import cpu_model, isa_flags
from stackbook.locations import REPO_ROOT
from stackbook.measure.slo_bounds import (
    clopper_pearson_interval,
    quantile_claim,
    quantile_interval_ranks,
    wilson_interval,
)

OUT = REPO_ROOT / "benchmarks" / "results" / "percentile_coverage.json"
SIZES = (20, 100, 400)
QUANTILES = (0.50, 0.95, 0.99)
ATTAINMENTS = (0.50, 0.90, 0.95, 0.99)
CONFIDENCE = 0.95
NOMINAL_BAND = (0.93, 0.97)

# Latencies in ms: a lognormal with median 200 ms (sigma 0.6) and an exponential with mean 100 ms.
DISTRIBUTIONS = {
    "lognormal(median 200 ms, sigma 0.6)": (
        lambda rng, size: rng.lognormal(math.log(200.0), 0.6, size),
        lambda q: math.exp(math.log(200.0) + 0.6 * stats.norm.ppf(q))),
    "exponential(mean 100 ms)": (
        lambda rng, size: rng.exponential(100.0, size),
        lambda q: -100.0 * math.log(1.0 - q)),
}


def _rate(hits: np.ndarray) -> dict:
    p = float(hits.mean())
    return {"observed": round(p, 4), "mc_standard_error": round(math.sqrt(p * (1 - p) / hits.size), 4)}


def _in_band(p: float) -> bool:
    return NOMINAL_BAND[0] <= p <= NOMINAL_BAND[1]


def quantile_coverage(sorted_samples: np.ndarray, true_quantile, n: int) -> dict:
    out = {}
    for q in QUANTILES:
        lo, hi, exact = quantile_interval_ranks(q, n, CONFIDENCE)
        truth = true_quantile(q)
        lower = sorted_samples[:, lo - 1] if lo >= 1 else np.full(len(sorted_samples), -np.inf)
        upper = sorted_samples[:, hi - 1] if hi <= n else np.full(len(sorted_samples), np.inf)
        covered = (lower <= truth) & (truth <= upper)
        sides = "two-sided" if lo >= 1 and hi <= n else (
            "lower side only (upper unbounded)" if lo >= 1 else "upper side only (lower unbounded)"
            if hi <= n else "neither side bounded")
        row = {"ranks": [lo, hi], "sides": sides, "exact_coverage": round(exact, 4), **_rate(covered)}
        row["observed_in_93_97"] = _in_band(row["observed"])
        out[f"p{round(q * 100)}"] = row
    return out


def attainment_coverage(samples: np.ndarray, true_quantile, n: int) -> dict:
    out = {}
    cp = np.array([clopper_pearson_interval(k, n, CONFIDENCE) for k in range(n + 1)])
    wi = np.array([wilson_interval(k, n, CONFIDENCE) for k in range(n + 1)])
    for a in ATTAINMENTS:
        met = (samples <= true_quantile(a)).sum(axis=1)
        row = {}
        for name, table in (("clopper_pearson", cp), ("wilson", wi)):
            covered = (table[met, 0] <= a) & (a <= table[met, 1])
            exact = float(sum(stats.binom.pmf(k, n, a) for k in range(n + 1)
                              if table[k, 0] <= a <= table[k, 1]))
            rate = _rate(covered)
            row[name] = {"exact_coverage": round(exact, 4), **rate, "observed_in_93_97": _in_band(rate["observed"])}
        out[f"attainment_{a:.2f}"] = row
    return out


def claim_errors_at_the_boundary(samples: np.ndarray, true_quantile, n: int) -> dict:
    """The bound set at the true percentile: 'inside' and 'outside' both overstate what is
    known, so each rate is a false-claim rate at its worst."""
    out = {}
    for q in (0.95, 0.99):
        verdicts = np.array([quantile_claim(q, n, k, CONFIDENCE).verdict for k in range(n + 1)])
        pmf = stats.binom.pmf(np.arange(n + 1), n, 1.0 - q)
        said = verdicts[(samples > true_quantile(q)).sum(axis=1)]
        out[f"p{round(q * 100)}"] = {
            word: {"exact": round(float(pmf[verdicts == word].sum()), 4), "observed": _rate(said == word)["observed"]}
            for word in ("inside", "outside")}
    return out


def run(points: int) -> dict:
    results = {}
    for d_index, (name, (draw, true_quantile)) in enumerate(DISTRIBUTIONS.items()):
        per_n = {}
        for n in SIZES:
            rng = np.random.default_rng([20260101, d_index, n])
            samples = draw(rng, (points, n))
            per_n[f"n={n}"] = {
                "quantile_interval_95": quantile_coverage(np.sort(samples, axis=1), true_quantile, n),
                "attainment_interval_95": attainment_coverage(samples, true_quantile, n),
                "claim_at_95_with_the_bound_at_the_true_percentile": claim_errors_at_the_boundary(
                    samples, true_quantile, n),
            }
        results[name] = per_n
    return results


def _span(values) -> str:
    values = sorted(values)
    return f"{values[0]:.1%} to {values[-1]:.1%}"


def notes(results: dict) -> list[str]:
    """What the figures say, with the ranges read from them."""
    cells = [c for per_n in results.values() for c in per_n.values()]
    order = [row for c in cells for row in c["quantile_interval_95"].values()]
    two_sided = [row for row in order if row["sides"] == "two-sided"]
    attain = [row for c in cells for row in c["attainment_interval_95"].values()]
    cp, wilson = [row["clopper_pearson"] for row in attain], [row["wilson"] for row in attain]
    worst = max(abs(row["observed"] - row["exact_coverage"]) / max(row["mc_standard_error"], 1e-4) for row in order)
    return [
        "Order-statistic intervals are exact and distribution-free, and conservative: ranks are whole numbers, so "
        f"each tail is held to at most 2.5% and the exact coverage lands at or above 95% "
        f"({_span(r['exact_coverage'] for r in order)} "
        f"here; {_span(r['exact_coverage'] for r in two_sided)} for the two-sided ones). Simulated: "
        f"{_span(r['observed'] for r in order)}, {sum(r['observed_in_93_97'] for r in order)} of {len(order)} cells in "
        f"93-97%. The simulation matches the exact binomial coverage for both distributions (largest gap "
        f"{worst:.1f} Monte Carlo standard errors), which is the check: the arithmetic is right and no distribution "
        "enters. Above 97% means wider than needed, never less safe.",
        "p95 at n=20 and p99 at n=20 and n=100 have no upper bound at 95% (0.95^20 and 0.99^100 exceed 0.025): the "
        "interval is open above, its coverage is that of the lower side alone, and the library reports the side as "
        "unbounded with the requests that would bound it (p95: 72, p99: 368), never as a finite interval.",
        f"Clopper-Pearson attainment intervals: exact coverage {_span(r['exact_coverage'] for r in cp)}, never below "
        f"95%, widest margin with few requests. Wilson: {_span(r['exact_coverage'] for r in wilson)}, nearer 95% on "
        "average but below it at some true attainments (the coverage of any binomial interval oscillates with the "
        "true proportion and n; worst here near attainment 0.95 at n=20 and 0.99 at n=100). Where a claim must "
        "hold, the exact interval is the one to decide with; Wilson is the tighter summary to show.",
        "Monte Carlo standard errors are given per cell; observed_in_93_97 is read off the simulated figure, "
        "exact_coverage is the same quantity without simulation noise.",
        "The claim rates put the bound exactly at the true percentile, the worst case for the rule: 'inside' and "
        "'outside' each stay at or below 5% by construction of the one-sided exact tests, and with few requests "
        "the rule mostly says 'undecided' (p99 at n=20 and n=100 can never be proven inside: 299 requests with "
        "none above the bound are needed).",
        "Attainment counts requests meeting every bound, binomial whatever the number of bounds, so one latency "
        "against one bound exercises the same arithmetic as a TTFT-and-TPOT SLO.",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description="coverage of the SLO intervals by simulation")
    ap.add_argument("--points", type=int, default=20000, help="simulated points per distribution and sample size")
    args = ap.parse_args()
    started = time.monotonic()
    results = run(args.points)
    record = {
        "format": "stackbook-percentile-coverage/1",
        "command": " ".join([".venv/bin/python", "benchmarks/percentile_coverage.py", *sys.argv[1:]]),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "host": {"cpu_model": cpu_model(), "logical_cpus": os.cpu_count(), "isa_flags": isa_flags(),
                 "python": platform.python_version(), "numpy": np.__version__,
                 "scipy": __import__("scipy").__version__},
        "settings": {"points_per_cell": args.points, "confidence": CONFIDENCE, "sizes": list(SIZES),
                     "quantiles": list(QUANTILES), "true_attainments": list(ATTAINMENTS),
                     "nominal_band": list(NOMINAL_BAND),
                     "seeds": "numpy default_rng([20260101, distribution index, n])"},
        "results": results,
        "notes": notes(results),
        "elapsed_s": round(time.monotonic() - started, 2),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {OUT.relative_to(REPO_ROOT)} in {record['elapsed_s']} s")


if __name__ == "__main__":
    main()
