"""How close a run's own time estimates came to its wall time: the plan before any slot, and each
revision after a slot (config.estimate_revision), against the seconds the run's rounds took.

Reads every run under outputs/ (and any folder given) whose manifest holds `time_estimates`. The
wall time is the rounds' own (first round's start to last round's end) plus the analysis, as
phase_times reads it; the error is estimate over actual, minus one. A run made before the
revisions existed has none and is not counted.

Run: .venv/bin/python benchmarks/estimate_accuracy.py [RUN_DIR ...]
Updates benchmarks/results/estimate_accuracy.json: the runs read replace their rows, the rows of
runs made on other machines stay (the record is over hosts). Nothing here is a pass/fail test.
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


def merged(kept: list[dict], read: list[dict]) -> list[dict]:
    """The record over hosts: runs read here replace their earlier rows; rows of runs made on
    another machine (not under this checkout's outputs/) stay."""
    fresh = {r["run"] for r in read}
    return sorted([r for r in kept if r["run"] not in fresh] + read, key=lambda r: r["run"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="*", type=Path)
    args = ap.parse_args()
    missing = [str(p) for p in args.runs if not (p / "manifest.json").exists()]
    if missing:
        raise SystemExit(f"no run (manifest.json) in: {', '.join(missing)}; give run folders such as "
                         "outputs/quickstart/reference, or none to read every run under outputs/")
    found = args.runs or sorted(p.parent for p in (REPO_ROOT / "outputs").glob("*/*/manifest.json"))
    rows = [r for r in (run_accuracy(p.resolve()) for p in found) if r]
    kept = json.loads(RESULTS.read_text())["runs"] if RESULTS.exists() else []
    RESULTS.write_text(json.dumps({"runs": merged(kept, rows)}, indent=2) + "\n")
    for r in rows:
        print(
            f"{r['run']}: actual {r['actual_s'] / 60:.1f} min; plan {r['plan_error_pct']:+.0f}%; after the first slot "
            f"{r['after_first_slot_error_pct']:+.0f}%"
            if r["after_first_slot_error_pct"] is not None
            else ""
        )
    print(f"wrote {RESULTS.relative_to(REPO_ROOT)}: {len(rows)} run(s) read here, kept with the rest")


if __name__ == "__main__":
    main()
