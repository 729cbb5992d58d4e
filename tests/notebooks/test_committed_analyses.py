"""The committed analysis notebooks read only their run's records, so executing them again must
give the outputs they store: nbval re-executes each one and compares every output, with
sanitizers for what differs by construction (pandas' random table ids). The selected notebooks
are re-executed two at a time (each in its own process and kernel), so that the tier's time
grows with half their number."""
import os
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from stackbook.locations import REPO_ROOT

ANALYSES = sorted(p for p in (REPO_ROOT / "outputs").glob("*/*/40_analysis.ipynb"))
SANITIZE = Path(__file__).with_name("nbval_sanitize.cfg")
AT_ONCE = max(1, min(2, os.cpu_count() or 1))


def nbval(notebook: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval",
                           "--nbval-current-env", "--nbval-sanitize-with", str(SANITIZE),
                           str(notebook.relative_to(REPO_ROOT))],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def nbval_runs(request) -> dict[Path, Future]:
    """Every notebook this session selected, submitted at once; each test waits for its own."""
    selected = [item.callspec.params["notebook"] for item in request.session.items
                if getattr(item, "originalname", None) == "test_the_stored_outputs_follow_from_the_records"]
    pool = ThreadPoolExecutor(AT_ONCE)
    yield {nb: pool.submit(nbval, nb) for nb in selected}
    pool.shutdown(cancel_futures=True)  # a session stopped early (-x) does not wait for the rest


def test_every_committed_run_has_its_analysis():
    assert {p.parent.parent.name for p in ANALYSES} >= {"quickstart", "aa-control", "workloads", "burstiness"}


@pytest.mark.parametrize("notebook", ANALYSES, ids=[f"{p.parent.parent.name}/{p.parent.name}" for p in ANALYSES])
def test_the_stored_outputs_follow_from_the_records(notebook, nbval_runs):
    r = nbval_runs[notebook].result()
    assert r.returncode == 0, r.stdout[-4000:]
