import os
import shutil
from pathlib import Path

import pytest
from stackbook.evidence.rundir import RunDir
from stackbook.runner import run_campaign


@pytest.fixture(scope="module")
def run_module_campaign(real_engines):
    """`run(campaign_text, campaign_file, run_id)`: the campaign written and run through on the real
    engines once for a module's tests; its run directories are removed after them unless
    STACKBOOK_KEEP_TEST_RUNS is set (to read a failed run)."""
    made: list[RunDir] = []

    def run(campaign_text: str, campaign_file: Path, run_id: str) -> RunDir:
        campaign_file.write_text(campaign_text)
        run_dir = run_campaign(str(campaign_file), run_id=run_id, progress=False)
        made.append(run_dir)
        return run_dir

    yield run
    if not os.environ.get("STACKBOOK_KEEP_TEST_RUNS"):
        for run_dir in made:
            shutil.rmtree(run_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def canary_subset(tmp_path_factory):
    """`subset(*ids)`: the path of a suite holding only those checks of the embedded suite, for a
    test whose subject is not the gate (a whole suite is the e2e test's, tests/engines/test_end_to_end.py)."""
    import yaml
    from stackbook.gate.canaries import suite_path

    def subset(*ids: str) -> str:
        suite = yaml.safe_load(suite_path("embedded-smollm2").read_text())
        checks = [c for c in suite["checks"] if c["id"] in ids]
        assert [c["id"] for c in checks] == list(ids), f"not in the embedded suite: {ids}"
        path = tmp_path_factory.mktemp("suite") / "canaries-subset.yaml"
        path.write_text(yaml.safe_dump({**suite, "suite": f"{suite['suite']}-subset", "checks": checks}))
        return str(path)
    return subset
