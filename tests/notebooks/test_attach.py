"""`stackbook attach`: a teaching notebook executed over a finished run is kept with the run's
evidence, hashed in its manifest, and reads that run's records."""
import json
import shutil
import subprocess
import sys

import nbformat
from stackbook.evidence.files import file_sha256
from stackbook.locations import REPO_ROOT


def test_demand_map_attached_to_a_run_reads_its_records_and_is_hashed(tmp_path):
    run = REPO_ROOT / "outputs" / "attach-test" / "avx2"
    shutil.rmtree(run.parent, ignore_errors=True)
    shutil.copytree(REPO_ROOT / "outputs/quickstart/avx2-host", run)
    try:
        r = subprocess.run([sys.executable, "-m", "stackbook.cli", "attach", "outputs/attach-test/avx2",
                            "50_demand_map",
                            "-p", "improvement=0.5", "--note", "the test's"], cwd=REPO_ROOT, capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr
        notebook = run / "50_demand_map.ipynb"
        manifest = json.loads((run / "manifest.json").read_text())
        entry = manifest["attached"]["50_demand_map"]
        assert entry["status"] == "ok" and entry["note"] == "the test's"
        assert entry["sha256"] == manifest["outputs"]["50_demand_map.ipynb"] == file_sha256(notebook)
        page = run / "50_demand_map.html"  # a reader opens the page, not the notebook's JSON
        assert manifest["outputs"]["50_demand_map.html"] == file_sha256(page)
        assert "stackbook attach outputs/attach-test/avx2 50_demand_map" in page.read_text()
        cells = nbformat.read(notebook, as_version=4).cells
        injected = next(c.source for c in cells if "injected-parameters" in c.metadata.get("tags", []))
        assert 'run_dir = "outputs/attach-test/avx2"' in injected
        text = json.dumps(cells)
        assert "Making **runtime** 50% faster" in text
        assert "not measured: its results.json predates the per-point runtime evidence" in text  # the run's own records
        assert str(REPO_ROOT) not in text
        bad = subprocess.run([sys.executable, "-m", "stackbook.cli", "attach", "outputs/attach-test/avx2",
                              "45_nothing"],
                             cwd=REPO_ROOT, capture_output=True, text=True)
        assert bad.returncode == 2 and "attachable notebooks: 00_decide, 50_demand_map" in bad.stderr
    finally:
        shutil.rmtree(run.parent, ignore_errors=True)


def test_a_closed_loop_run_renders_its_demand_map_itself_and_an_open_loop_one_does_not(tmp_path):
    from stackbook.config.loading import load_campaign
    from stackbook.evidence.manifest import ManifestFile
    from stackbook.evidence.rundir import RunDir
    from stackbook.reports import attach_teaching, teaching_pages

    from tests.support.runs import copy_committed_run_to

    run = RunDir(tmp_path / "run")
    copy_committed_run_to(run.path, "quickstart", "avx2-host")
    campaign = load_campaign(run.campaign_resolved)
    assert teaching_pages(campaign) == ["50_demand_map"]
    assert teaching_pages(load_campaign(REPO_ROOT / "outputs/known-effect/reference/campaign.resolved.yaml")) == []
    manifest = ManifestFile(run, campaign=None, campaign_file="")
    attach_teaching(run, campaign, manifest)
    entry = json.loads(run.manifest.read_text())["attached"]["50_demand_map"]
    assert entry["status"] == "ok" and entry["sha256"] == file_sha256(run.path / "50_demand_map.ipynb")
    assert "Mean Value Analysis" in (run.path / "50_demand_map.html").read_text()
