"""The set-up from an empty cache, commit against commit: each a fresh clone's `bash tools/bootstrap.sh
all` with empty engine and pip caches, each line of its output stamped with the second it arrived and
the machine's CPU time sampled around it, run in the order given (interleave them: hosts drift
within a day). Appends each run, with this host's CPU and instruction sets, to
benchmarks/results/setup_time.json.

    python benchmarks/setup_time.py NEW OLD NEW OLD     # about 9 minutes a run on 2 cores

Nothing here is a pass/fail test; run it on an otherwise idle machine.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from first_answer import LLAMA_BUILT, SETUP_NEEDS_READY, STAMPED, VENV_READY, stamp_run, step_seconds
from suite_time import append_run

RESULT = Path(__file__).parent / "results" / "setup_time.json"
REPO = Path(__file__).resolve().parents[1]
ENGINES_BEGIN = re.compile(r"\[setup\]\S* engines: ")


def cpu_seconds() -> float:
    """The machine's busy CPU time so far (user, nice, system, irq, softirq), from /proc/stat."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = sum(int(fields[i]) for i in (0, 1, 2, 5, 6))
    return ticks / 100  # USER_HZ is 100 on Linux


def read_log(text: str) -> dict:
    """Seconds to each step the set-up names, from the log's first stamp."""
    stamped = [(int(m["t"]), m["line"] or "") for m in map(STAMPED.match, text.splitlines()) if m]
    began = stamped[0][0]
    engines_at = next((t - began for t, line in stamped if ENGINES_BEGIN.search(line)), None)
    return {"whole_s": stamped[-1][0] - began, "engines_begin_s": engines_at,
            "setup_needs_s": step_seconds(SETUP_NEEDS_READY, text), "venv_s": step_seconds(VENV_READY, text)}


def one_run(commit: str) -> dict:
    work = Path(tempfile.mkdtemp(prefix="setup-time-"))
    clone, log = work / "main", work / "setup.log"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", commit], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(STACKBOOK_CACHE=str(work / "cache"), PIP_CACHE_DIR=str(work / "pip-cache"))
    cpu_before = cpu_seconds()
    if stamp_run(["bash", "tools/bootstrap.sh", "all"], clone, env, log) != 0:
        sys.exit(f"the set-up at {commit} failed; its output: {log}")
    cpu = cpu_seconds() - cpu_before
    figures = read_log(log.read_text(errors="replace"))
    built = LLAMA_BUILT.search((work / "cache" / "logs" / "llama.log").read_text())
    short = subprocess.run(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True, check=True).stdout.strip()
    shutil.rmtree(work)  # about 6 GB a run: a few runs' leftovers fill a small disk
    return {"commit": short, **figures, "llama_build_s": int(built["s"]) if built else None,
            "cpu_s": round(cpu), "cores_busy": round(cpu / figures["whole_s"], 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("commits", nargs="+", help="the commits to set up, in this order")
    ap.add_argument("--out", type=Path, default=RESULT)
    a = ap.parse_args()
    for commit in a.commits:
        run = one_run(commit)
        append_run(a.out, "stackbook-setup-time/1", "python benchmarks/setup_time.py COMMIT...", run)


if __name__ == "__main__":
    main()
