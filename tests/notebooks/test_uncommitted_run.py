"""A run allowed from modified code says so everywhere its revision is shown: the manifest, each
passport, the report's "how this was made" box and each arm page's. An endpoint arm on the
calibration server, no engine."""
import json
import shutil

from stackbook.evidence import harness
from stackbook.evidence.rundir import RunDir
from stackbook.runner import run_campaign

from tests.support.calibration import endpoint_campaign

MODIFIED = {"version": "0.1.0", "commit": "abcdef012345", "modified": True, "diff_sha256": "0123456789abcdef" * 4,
            "changed_files": ["lib/stackbook/x.py"]}
MARK = "recorded from uncommitted code (diff sha256 0123456789abcdef)"


def test_a_run_allowed_from_modified_code_is_marked_everywhere(tmp_path, monkeypatch, start_calibration_server,
                                                              write_campaign):
    monkeypatch.delenv(harness.ALLOW_ENV, raising=False)
    monkeypatch.setattr(harness, "current_revision", lambda: dict(MODIFIED))
    server = start_calibration_server()
    campaign = write_campaign(endpoint_campaign(
        server.base_url, model="{name: calibration, source: remote}", arrival="{kind: closed_loop, concurrency: [1]}",
        requests_per_point=3, warmup_requests=0, processes=1))
    run = None
    try:
        run = run_campaign(str(campaign), run_id=f"modified-{tmp_path.name}", progress=False, allow_modified=True)
        recorded = json.loads(run.manifest.read_text())["harness"]
        assert recorded["allowed_by"] == "--allow-modified" and recorded["note"] == MARK
        assert recorded["changed_files"] == ["lib/stackbook/x.py"]
        passport = json.loads(run.arm("cal").passport_json.read_text())
        assert passport["protocol"]["harness"] == f"stackbook 0.1.0 (abcdef012345), {MARK}"
        for page in (run.report, run.arm("cal").notebook("30_load_sweep").with_suffix(".html")):
            assert f'How this was made <span class="stackbook-uncommitted">({MARK})</span>' in page.read_text(), page
    finally:
        if run is not None:
            shutil.rmtree(RunDir(run.path).path, ignore_errors=True)
