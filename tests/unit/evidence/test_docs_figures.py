"""Figures the docs quote from a committed run are the run's: each is recomputed from its
analysis.json and must appear in the doc as written."""
import json
import re
from pathlib import Path


def _span(values, digits=0) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.{digits}f}-{hi:.{digits}f}"


def test_the_burstiness_figures_in_runs_md_are_the_runs():
    rows = json.loads(Path("outputs/burstiness/reference/analysis.json").read_text())["open_loop_waits"]
    doc = re.sub(r"\s+", " ", Path("docs/runs.md").read_text())
    arms = ["constant", "gamma-0.25", "poisson", "gamma-4"]
    by_arm = {a: [r for r in rows if r["arm"] == a] for a in arms}
    waits = ", ".join(_span([r["wait_ms_mean"] for r in by_arm[a]]) for a in arms[:-1])
    waits += f" and {_span([r['wait_ms_mean'] for r in by_arm[arms[-1]]])} ms"
    cvs = [f"{sum(r['arrival_cv'] for r in by_arm[a]) / len(by_arm[a]):.2f}" for a in arms]
    util = [r["utilization"] for r in rows]
    errors = [r["kingman_error_pct"] for r in rows if r["kingman_error_pct"] is not None]
    assert f"wait grows with the arrival variance at the same scheduled rate: {waits}" in doc
    assert f"measured C_a = {', '.join(cvs[:-1])} and {cvs[-1]}" in doc
    assert f"(utilisation {min(util):.2f} to {max(util):.2f})" in doc
    assert f"misses by {min(errors):.0f}% to +{max(errors):.0f}%" in doc
