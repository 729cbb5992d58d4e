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


def test_the_known_effect_figures_in_verdict_md_are_the_runs():
    run = Path("outputs/known-effect/reference")
    verdict = json.loads((run / "analysis.json").read_text())["verdict"]
    doc = re.sub(r"\s+", " ", Path("docs/verdict.md").read_text())
    [line] = [v for v in verdict if v.startswith("Known-effect control slow")]
    found = re.findall(r"rate ([\d.]+), TPOT p50: ahead \(fast ahead\), ratio fast/slow \[([\d.]+), ([\d.]+)\] "
                       r"against the true ([\d.]+)", line)
    assert [f[0] for f in found] == ["0.4", "0.8"], line   # found at every rate
    for rate, lo, hi, truth in found:
        assert f"at {rate} req/s [{lo}, {hi}] against the true {truth}" in doc
    assert any(v.startswith("A/A control fast-again (a replica of fast): nothing ranked") for v in verdict)
    relay = json.loads((run / "arms" / "slow" / "engine.json").read_text())["known_delay"]
    late = relay["release_late_ms"]
    assert (f"{late['mean']:.2f} ms on average, {late['max']:.1f} ms at most, over "
            f"{relay['held_token_events']:,} events") in doc
