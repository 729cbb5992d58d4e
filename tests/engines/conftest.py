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
