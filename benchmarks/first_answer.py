"""The first answer's time, as a newcomer meets it: a fresh clone's `make quickstart`, set-up
included, with an empty engine cache or the one this machine has, each line of its output stamped
with the second it arrived. Appends the figures, with this host's CPU and instruction sets, to
benchmarks/results/first_answer.json.

    python benchmarks/first_answer.py --empty-cache      # clones HEAD, about 15 minutes on 2 cores
    python benchmarks/first_answer.py --log LOG --clone DIR --cache DIR --empty-cache  # a run made so

The set-up is the time to its last `[setup]` line; the campaign's own wall time is its manifest's;
the llama-server build is what the build says in the cache's log, the `.venv` what its step says.
The whole includes the clone's `.venv`. Nothing here is a pass/fail test.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from suite_time import append_run

RESULT = Path(__file__).parent / "results" / "first_answer.json"
STAMPED = re.compile(r"^(?P<t>\d{9,11})(?: (?P<line>.*))?$")
RUN_FOLDER = re.compile(r"outputs/quickstart/(?P<stamp>\d{8}T\d{6}Z)")
LLAMA_BUILT = re.compile(r"llama-server built in (?P<s>\d+) s")
VENV_READY = re.compile(r"workbook environment \(\.venv\): ready in (?P<s>\d+) s")
# Since fb1d9cd2 the .venv comes in two parts: what the engine step imports first, the rest beside it.
SETUP_NEEDS_READY = re.compile(r"the engine step's packages in (?P<s>\d+) s")


def step_seconds(pattern: re.Pattern, text: str) -> int | None:
    """The seconds a set-up line gives for its step (`pattern`'s group s); None where no line does."""
    return next((int(m["s"]) for m in map(pattern.search, text.splitlines()) if m), None)


def read_log(text: str) -> dict:
    """Seconds from the log's first stamp to its last `[setup]` line and to its end; the run folder."""
    stamped = [(int(m["t"]), m["line"] or "") for m in map(STAMPED.match, text.splitlines()) if m]
    if not stamped:
        raise SystemExit("the log has no stamped lines: make it with this script (or stamp each line '<epoch> ...')")
    began = stamped[0][0]
    setup = [t for t, line in stamped if "[setup]" in line]
    folders = [m["stamp"] for _, line in stamped for m in RUN_FOLDER.finditer(line)]
    if not setup or not folders:
        raise SystemExit("the log has no [setup] line or names no outputs/quickstart/<run>: was it make quickstart?")
    return {"whole_s": stamped[-1][0] - began, "setup_s": setup[-1] - began,
            "venv_s": step_seconds(VENV_READY, text), "setup_needs_s": step_seconds(SETUP_NEEDS_READY, text),
            "run": f"outputs/quickstart/{folders[-1]}"}


def verdict(run: Path) -> list[dict]:
    """The run's output-throughput comparisons, one a load: the leader and the ratio with its interval."""
    decisions = json.loads((run / "analysis.json").read_text())["decisions"]
    return [{k: d[k] for k in ("load", "leader", "ratio", "lo", "hi")}
            for d in decisions if d["metric"] == "output_throughput"]


def stamp_run(command: list[str], cwd: Path, env: dict, log: Path) -> int:
    """Run `command`, writing each line of its output to `log` behind the second it arrived."""
    with open(log, "w") as out:
        out.write(f"{int(time.time())}\n")
        proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace")
        for line in proc.stdout:
            out.write(f"{int(time.time())} {line}")
            out.flush()
        rc = proc.wait()
        out.write(f"{int(time.time())} make exited {rc}\n")
    return rc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--empty-cache", action="store_true", help="set up from an empty engine and pip cache")
    ap.add_argument("--log", type=Path, help="read a run already made, not make one")
    ap.add_argument("--clone", type=Path, help="with --log: the clone the run was made in")
    ap.add_argument("--cache", type=Path, help="with --log: its $STACKBOOK_CACHE")
    ap.add_argument("--out", type=Path, default=RESULT)
    a = ap.parse_args()
    if a.log is None:
        work = Path(tempfile.mkdtemp(prefix="first-answer-"))
        a.clone, a.log = work / "main", work / "quickstart.log"
        subprocess.run(["git", "clone", "-q", str(Path(__file__).resolve().parents[1]), str(a.clone)], check=True)
        env = dict(os.environ)
        if a.empty_cache:
            a.cache = work / "cache"
            env.update(STACKBOOK_CACHE=str(a.cache), PIP_CACHE_DIR=str(work / "pip-cache"))
        if stamp_run(["make", "quickstart"], a.clone, env, a.log) != 0:
            sys.exit(f"make quickstart failed; its output: {a.log}")
    elif a.clone is None:
        sys.exit("--log needs --clone: the clone whose outputs/ holds the run")
    figures = read_log(a.log.read_text(errors="replace"))
    manifest = json.loads((a.clone / figures["run"] / "manifest.json").read_text())
    llama_log = a.cache / "logs" / "llama.log" if a.cache else None
    built = LLAMA_BUILT.search(llama_log.read_text()) if llama_log and llama_log.is_file() else None
    commit = subprocess.run(["git", "-C", str(a.clone), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True, check=True).stdout.strip()
    append_run(a.out, "stackbook-first-answer/1", "python benchmarks/first_answer.py [--empty-cache]",
               {"commit": commit, "cache": "empty" if a.empty_cache else "engines cached", **figures,
                "campaign_s": manifest["phase_seconds"]["wall"], "rounds": len(manifest["repetitions"]["rounds"]),
                "precision": manifest["precision"]["chosen"], "llama_build_s": int(built["s"]) if built else None,
                "output_throughput": verdict(a.clone / figures["run"])})


if __name__ == "__main__":
    main()
