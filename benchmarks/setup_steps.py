"""Two steps of the set-up, each timed both ways on this host (wall and CPU seconds of the step and its
children), appended with the host's CPU and instruction sets to benchmarks/results/setup_steps.json:

- the llama-cpp-python sdist fetched by `pip download` as the set-up's fallback asks it
  (llama_cpp_build.pip_download: pip prepares the sdist's metadata first) against the pinned file
  read straight from the index;
- the bytecode of the workbook's packages (the `.venv`'s site-packages) compiled one file after
  another, as pip does at install, against `compileall -j 0` on every core after a `--no-compile`
  install (measured while the `.venv` was the set-up's only step, the second core idle; the engine
  installs now begin beside it, benchmarks/setup_time.py).

    .venv/bin/python benchmarks/setup_steps.py     # about 3 minutes on 2 cores, network needed

Each runs into a scratch folder with an empty pip cache; the bytecode is written into a copy of the
site-packages. Nothing here is a pass/fail test.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from suite_time import append_run

from stackbook.engines.index_download import download_pinned
from stackbook.engines.llama_cpp import LLAMA_CPP_SDIST
from stackbook.engines.llama_cpp_build import pip_download

RESULT = Path(__file__).parent / "results" / "setup_steps.json"


def timed(step, *args) -> dict:
    """Wall seconds, and CPU seconds of this process and its children, of one call."""
    before, began = os.times(), time.monotonic()
    step(*args)
    after, wall = os.times(), time.monotonic() - began
    cpu = sum(getattr(after, f) - getattr(before, f) for f in ("user", "system", "children_user", "children_system"))
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1)}


def compile_all(site: Path, workers: int) -> None:
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", str(workers), str(site)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=RESULT)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="setup-steps-"))
    os.environ["PIP_CACHE_DIR"] = str(work / "pip-cache")
    try:
        fetch = {"pip_download": timed(pip_download, sys.executable, LLAMA_CPP_SDIST, work / "pip"),
                 "index_read": timed(download_pinned, LLAMA_CPP_SDIST, work / "index")}
        if not (work / "pip" / LLAMA_CPP_SDIST.filename).is_file():
            raise SystemExit("pip download failed (its output above)")
        site = work / "site-packages"
        shutil.copytree(sysconfig.get_path("purelib"), site, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        files = sum(1 for _ in site.rglob("*.py"))
        one = timed(compile_all, site, 1)
        for cached in site.rglob("__pycache__"):
            shutil.rmtree(cached)
        every = timed(compile_all, site, 0)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    append_run(a.out, "stackbook-setup-steps/1", "python benchmarks/setup_steps.py",
               {"sdist": {"file": LLAMA_CPP_SDIST.filename, **fetch},
                "workbook_bytecode": {"python_files": files, "one_at_a_time": one, "every_core": every}})


if __name__ == "__main__":
    main()
