"""A run is started from committed code: modified tracked files under lib/, notebooks/ or
campaigns/ refuse it, naming them and both ways on; `--allow-modified` (or STACKBOOK_ALLOW_MODIFIED)
records it anyway, marked so in the manifest, the passports and the report's box."""
import json
import subprocess

import nbformat
import pytest
from typer.testing import CliRunner
from stackbook.cli import app
from stackbook.evidence import harness
from stackbook.evidence.harness import (ALLOW_ENV, RevisionChanged, UncommittedCode, describe, fix_revision,
                                        starting_revision)
from stackbook.evidence.rundir import OUTPUTS
from stackbook.report_page import made_box
from stackbook.runner import run_campaign

from tests.support.calibration import endpoint_campaign


def git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A committed checkout with code, notebooks, campaigns and docs, as the revision reads it."""
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    root = tmp_path / "checkout"
    for name in ("lib/a.py", "lib/b.py", "lib/c.py", "notebooks/n1.py", "notebooks/n2.py", "campaigns/q.yaml",
                 "campaigns/r.yaml", "docs/d.md"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"{name}\n")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "code")
    monkeypatch.setattr(harness, "REPO_ROOT", root)
    return root


def test_committed_code_starts_and_changes_elsewhere_do_not_count(repo):
    (repo / "docs/d.md").write_text("edited\n")
    (repo / "outputs/c/run").mkdir(parents=True)
    (repo / "outputs/c/run/manifest.json").write_text("{}")
    (repo / "campaigns/mine.yaml").write_text("name: mine\n")  # untracked: a campaign being written
    revision = starting_revision()
    assert revision["modified"] is False and len(revision["commit"]) == 12
    assert describe(revision) == f"stackbook {revision['version']} ({revision['commit']})"


def test_modified_code_is_refused_naming_the_files_and_both_fixes(repo):
    for name in ("lib/a.py", "lib/b.py", "lib/c.py", "notebooks/n1.py", "notebooks/n2.py", "campaigns/q.yaml",
                 "campaigns/r.yaml"):
        (repo / name).write_text("changed\n")
    with pytest.raises(UncommittedCode) as refused:
        starting_revision()
    message = str(refused.value)
    assert message.startswith("the work tree has uncommitted changes to 7 tracked file(s) under lib/, notebooks/ "
                              "or campaigns/: campaigns/q.yaml, campaigns/r.yaml, lib/a.py, "
                              "lib/b.py, lib/c.py and 2 more.")
    assert "Commit them and run again, or pass --allow-modified (or set STACKBOOK_ALLOW_MODIFIED=1)" in message


def test_a_staged_change_is_uncommitted_too(repo):
    (repo / "lib/a.py").write_text("staged\n")
    git(repo, "add", "lib/a.py")
    with pytest.raises(UncommittedCode, match=r"1 tracked file\(s\) .*: lib/a.py\. "):
        starting_revision()


def test_allowed_modified_code_is_marked_with_its_diff_digest(repo, monkeypatch):
    (repo / "lib/a.py").write_text("changed\n")
    revision = starting_revision(allow_modified=True)
    digest = revision["diff_sha256"]
    assert (len(digest) == 64 and revision["changed_files"] == ["lib/a.py"]
            and revision["allowed_by"] == "--allow-modified")
    assert revision["note"] == f"recorded from uncommitted code (diff sha256 {digest[:16]})"
    assert describe(revision) == f"stackbook {revision['version']} ({revision['commit']}), {revision['note']}"
    monkeypatch.setenv(ALLOW_ENV, "1")
    assert starting_revision()["allowed_by"] == "STACKBOOK_ALLOW_MODIFIED=1"
    (repo / "lib/a.py").write_text("changed again\n")
    assert starting_revision()["diff_sha256"] != digest


def test_a_resumed_run_must_be_the_same_code(repo):
    (repo / "lib/a.py").write_text("changed\n")
    manifest = {}
    fix_revision(manifest, resumed=False, now=starting_revision(allow_modified=True))
    assert fix_revision(manifest, resumed=True, now=starting_revision(allow_modified=True)) == manifest["harness"]
    (repo / "lib/a.py").write_text("changed again\n")
    with pytest.raises(RevisionChanged, match="recorded from uncommitted code"):
        fix_revision(manifest, resumed=True, now=starting_revision(allow_modified=True))


def test_a_run_recorded_before_the_refusal_keeps_its_passport_line():
    old = {"version": "0.1.0", "commit": "74b2c2f23e87", "modified": True, "diff_sha256": "4a471e035c88c1c4"}
    assert describe(old) == "stackbook 0.1.0 (74b2c2f23e87+modified 4a471e035c88c1c4)"


MODIFIED = {"version": "0.1.0", "commit": "abcdef012345", "modified": True, "diff_sha256": "f" * 64,
            "changed_files": ["lib/x.py"]}


def test_stackbook_run_refuses_before_writing_anything(tmp_path, monkeypatch, start_calibration_server):
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    monkeypatch.setattr(harness, "current_revision", lambda: dict(MODIFIED))
    server = start_calibration_server()
    campaign = tmp_path / "c.yaml"
    campaign.write_text(endpoint_campaign(server.base_url, model="{name: calibration, source: remote}",
                                          arrival="{kind: closed_loop, concurrency: [1]}",
                                          requests_per_point=2, warmup_requests=0, processes=1))
    run_id = f"refused-{tmp_path.name}"
    out = CliRunner().invoke(app, ["run", str(campaign), "--run-id", run_id, "--no-progress"])
    assert out.exit_code == 2, out.output
    assert "uncommitted changes to 1 tracked file(s) under lib/, notebooks/ or campaigns/: lib/x.py." in out.output
    assert "--allow-modified" in out.output
    assert not (OUTPUTS / "calibration" / run_id).exists() and server.requests == 0
    with pytest.raises(UncommittedCode):
        run_campaign(str(campaign), run_id=run_id, progress=False)
    assert not (OUTPUTS / "calibration" / run_id).exists()


def test_the_report_box_says_a_run_was_recorded_from_uncommitted_code(tmp_path):
    run = tmp_path / "run"
    (run / "arms" / "a").mkdir(parents=True)
    revision = MODIFIED | {"note": "recorded from uncommitted code (diff sha256 ffffffffffffffff)"}
    (run / "manifest.json").write_text(json.dumps({"campaign_file": "campaigns/c.yaml", "harness": revision}))
    nb = nbformat.v4.new_notebook(metadata={"papermill": {"parameters": {"arm": "a"}}})
    for page_dir in (run, run / "arms" / "a"):
        box = made_box(nb, "30_load_sweep", page_dir)
        assert ('<summary>How this was made <span class="stackbook-uncommitted">(recorded from uncommitted code '
                '(diff sha256 ffffffffffffffff))</span></summary>') in box
        assert ("<p>Measured by stackbook 0.1.0 (abcdef012345), recorded from uncommitted code "
                "(diff sha256 ffffffffffffffff).</p>") in box
    (run / "manifest.json").write_text(json.dumps({"harness": {"version": "0.1.0", "commit": "abcdef012345",
                                                               "modified": False}}))
    box = made_box(nb, "40_analysis", run)
    assert "<summary>How this was made</summary>" in box and "Measured by stackbook 0.1.0 (abcdef012345).</p>" in box
    assert "uncommitted" not in made_box(nb, "60_compare", tmp_path / "no-run")
