"""Every path of a run comes from RunDir: the layout the README documents."""
from pathlib import Path

import pytest
from stackbook.evidence.rundir import ARM_NOTEBOOKS, RunDir


def test_layout_of_a_run():
    run = RunDir.new("quickstart", "r1")
    assert run.path == Path("outputs/quickstart/r1") and run.name == "r1"
    assert run.campaign_resolved == Path("outputs/quickstart/r1/campaign.resolved.yaml")
    assert run.manifest.name == "manifest.json" and run.report.name == "report.html"
    assert run.analysis_notebook == run.path / "40_analysis.ipynb"
    assert run.analysis == run.path / "analysis.json"
    assert run.figures == run.path / "figures"
    arm = run.arm("llama")
    assert arm.path == Path("outputs/quickstart/r1/arms/llama") and arm.name == "llama"
    assert [arm.notebook(n).name for n in ARM_NOTEBOOKS] == ["10_sizing.ipynb", "20_canaries.ipynb",
                                                              "30_load_sweep.ipynb"]
    assert {p.name for p in (arm.requests, arm.results, arm.engine_json, arm.engine_log, arm.passport_json,
                             arm.passport_md)} == {"requests.jsonl", "results.json", "engine.json", "engine.log",
                                                   "passport.json", "passport.md"}
    assert str(run) == "outputs/quickstart/r1" and Path(arm) == arm.path  # usable wherever a path is


def test_a_run_id_defaults_to_the_utc_time():
    assert RunDir.new("c").name.endswith("Z")
    assert RunDir.interactive("c").name.startswith("interactive-")


def test_existing_refuses_a_folder_that_is_not_a_run(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a run directory .no campaign.resolved.yaml."):
        RunDir.existing(tmp_path)
    (tmp_path / "campaign.resolved.yaml").write_text("name: x\n")
    run = RunDir.existing(tmp_path)
    assert run.arm("a").create().exists() and (tmp_path / "arms" / "a").is_dir()
