"""The committed analysis notebooks read only their run's records, so executing them again must
give the outputs they store: nbval re-executes each one and compares every output, with
sanitizers for what differs by construction (pandas' random table ids)."""
import subprocess
import sys
from pathlib import Path

import pytest
from stackbook.locations import REPO_ROOT

ANALYSES = sorted(p for p in (REPO_ROOT / "outputs").glob("*/*/40_analysis.ipynb"))
SANITIZE = Path(__file__).with_name("nbval_sanitize.cfg")


def test_every_committed_run_has_its_analysis():
    assert {p.parent.parent.name for p in ANALYSES} >= {"quickstart", "aa-control", "workloads", "burstiness"}


@pytest.mark.parametrize("notebook", ANALYSES, ids=[f"{p.parent.parent.name}/{p.parent.name}" for p in ANALYSES])
def test_the_stored_outputs_follow_from_the_records(notebook):
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval", "--nbval-current-env",
                        "--nbval-sanitize-with", str(SANITIZE), str(notebook.relative_to(REPO_ROOT))],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-4000:]
