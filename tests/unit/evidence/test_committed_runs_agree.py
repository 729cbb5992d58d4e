"""Every committed run agrees with the code in main: `stackbook audit` finds its files as sealed,
each point's figures recomputed from its raw records, its analysis what the current analysis
computes from those records, and its passports rebuilt the same."""
from pathlib import Path

import pytest
from stackbook.run_checks.audit import audit_run

RUNS = sorted(p.parent for p in Path("outputs").glob("*/*/manifest.json"))


def test_every_committed_run_is_checked():
    assert {p.parent.name for p in RUNS} >= {"quickstart", "workloads", "four-engines", "burstiness", "aa-control"}


@pytest.mark.parametrize("run_path", RUNS, ids=[f"{p.parent.name}/{p.name}" for p in RUNS])
def test_the_committed_run_audits_consistent(run_path):
    audit = audit_run(run_path)
    assert audit.consistent, "\n".join(audit.problems()[:20])
