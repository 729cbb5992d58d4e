"""How close a run's own time estimates came to its wall time: the plan before any slot, and each
revision after a slot (config.estimate_revision), against the seconds the run's rounds took.

Reads every run under outputs/ (and any folder given) whose manifest holds `time_estimates`. The
wall time is the rounds' own (first round's start to last round's end) plus the analysis, as
phase_times reads it; the error is estimate over actual, minus one. A run made before the
revisions existed has none and is not counted.

Run: .venv/bin/python benchmarks/estimate_accuracy.py [RUN_DIR ...]
Writes benchmarks/results/estimate_accuracy.json. Nothing here is a pass/fail test.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from stackbook.host import isa_class
from stackbook.locations import REPO_ROOT, symbolic

RESULTS = REPO_ROOT / "benchmarks" / "results" / "estimate_accuracy.json"


def actual_seconds(manifest: dict) -> float | None:
    """The rounds' wall seconds plus the analysis: what the estimates estimate."""
    rounds = (manifest.get("repetitions") or {}).get("rounds") or []
    if not rounds or not all(r.get("finished_unix") for r in rounds):
        return None
    spent = rounds[-1]["finished_unix"] - rounds[0]["started_unix"]
    return spent + ((manifest.get("phase_seconds") or {}).get("analysis") or 0.0)


def run_accuracy(run: Path) -> dict | None:
    """One run's estimates against its wall time; None where it holds no estimates or did not finish."""
    path = run / "manifest.json"
    if not path.exists():
        return None
    manifest = json.loads(path.read_text())
    estimates, actual = manifest.get("time_estimates") or [], actual_seconds(manifest)
    if not estimates or actual is None:
        return None
    host = next((json.loads(e.read_text()).get("host") or {} for e in sorted(run.glob("arms/*/engine.json"))), {})
    return {
        "run": symbolic(run.relative_to(REPO_ROOT) if run.is_relative_to(REPO_ROOT) else run),
        "host": host.get("cpu") or "not recorded",
        "isa": isa_class(host.get("isa_flags") or []),
        "actual_s": round(actual, 1),
        "estimates": [e | {"error_pct": round(100 * (e["total_s"] / actual - 1), 1)} for e in estimates],
        "plan_error_pct": round(100 * (estimates[0]["total_s"] / actual - 1), 1),
        "after_first_slot_error_pct": (round(100 * (estimates[1]["total_s"] / actual - 1), 1)
                                       if len(estimates) > 1 else None),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="*", type=Path)
    args = ap.parse_args()
    found = args.runs or sorted(p.parent for p in (REPO_ROOT / "outputs").glob("*/*/manifest.json"))
    rows = [r for r in (run_accuracy(p.resolve()) for p in found) if r]
    RESULTS.write_text(json.dumps({"runs": rows}, indent=2) + "\n")
    for r in rows:
        print(
            f"{r['run']}: actual {r['actual_s'] / 60:.1f} min; plan {r['plan_error_pct']:+.0f}%; after the first slot "
            f"{r['after_first_slot_error_pct']:+.0f}%"
            if r["after_first_slot_error_pct"] is not None
            else ""
        )
    print(f"wrote {RESULTS.relative_to(REPO_ROOT)}: {len(rows)} run(s) with estimates")


if __name__ == "__main__":
    main()
