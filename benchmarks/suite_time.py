"""The suite's time, one fresh-clone CI at a time: reads the log of `(time CI=true bash .ci/run)` and
appends its figures, with this host's CPU and instruction sets, to benchmarks/results/suite_time.json.
The budget is per host type (docs/setup.md), so every run names the host that ran it.

    d=$(mktemp -d) && git clone -q . "$d/main" && (cd "$d/main" && (time CI=true bash .ci/run) > "$d/ci.log" 2>&1)
    python benchmarks/suite_time.py "$d/ci.log" --commit "$(git -C "$d/main" rev-parse --short HEAD)" --workers 2
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
from pathlib import Path

from stackbook.host import cpu_model, isa_flags

RESULT = Path(__file__).parent / "results" / "suite_time.json"
SUMMARY = re.compile(r"^=*\s*(?P<counts>\d+ (?:passed|failed).*?) in (?P<s>[\d.]+)s\b", re.M)
REAL = re.compile(r"^real\s+(?P<m>\d+)m(?P<s>[\d.]+)s", re.M)
SLOWEST = re.compile(r"^(?P<s>[\d.]+)s (?P<phase>setup|call|teardown)\s+(?P<test>\S+)", re.M)


def read_log(text: str) -> dict:
    """pytest's last summary line and the shell's `real`: the tests' seconds and the whole CI's."""
    summaries, reals = list(SUMMARY.finditer(text)), list(REAL.finditer(text))
    if not summaries or not reals:
        raise SystemExit("the log has no pytest summary line or no `real` line: run the CI under `time`")
    last = summaries[-1]
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|errors?|skipped)", last["counts"])}
    real = reals[-1]
    slowest = [{"s": float(m["s"]), "phase": m["phase"], "test": m["test"]} for m in SLOWEST.finditer(text)]
    return {"tests_s": float(last["s"]), "whole_s": round(int(real["m"]) * 60 + float(real["s"]), 1),
            "passed": counts.get("passed", 0), "failed": counts.get("failed", 0),
            "errors": counts.get("error", 0) + counts.get("errors", 0), "slowest": slowest}


def append_run(out: Path, fmt: str, command: str, run: dict) -> None:
    """One run, dated and with this host's CPU and instruction sets, appended to a record of runs."""
    run = {**run, "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "host": {"cpu_model": cpu_model(), "isa_flags": isa_flags(), "cpus": os.cpu_count()}}
    runs = json.loads(out.read_text())["runs"] if out.exists() else []
    out.write_text(json.dumps({"format": fmt, "command": command, "runs": [*runs, run]}, indent=1) + "\n")
    print(json.dumps(run, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", type=Path, help="the CI's output, `time` included")
    ap.add_argument("--commit", required=True, help="the commit the fresh clone ran")
    ap.add_argument("--workers", type=int, required=True, help="the pytest workers the commit's make test ran (-n)")
    ap.add_argument("--out", type=Path, default=RESULT)
    a = ap.parse_args()
    append_run(a.out, "stackbook-suite-time/1", "(time CI=true bash .ci/run) in a fresh clone",
               {"commit": a.commit, "workers": a.workers, **read_log(a.log.read_text())})


if __name__ == "__main__":
    main()
