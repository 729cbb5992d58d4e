"""Every path of a run comes from RunDir: the layout the README documents."""
from pathlib import Path

import pytest
from stackbook.evidence.rundir import ARM_NOTEBOOKS, ComparisonDir, RunDir
from stackbook.locations import OUTPUTS, OUTPUTS_DIR, REPO_ROOT


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


def test_a_run_lists_its_passports_notebooks_and_pages_arms_first(tmp_path):
    run = RunDir(tmp_path)
    for arm in ("b", "a"):
        run.arm(arm).create()
        for name in ("30_load_sweep.ipynb", "30_load_sweep.html"):
            (run.arm(arm) / name).write_text("")
    run.arm("a").passport_json.write_text("{}")
    for name in ("40_analysis.ipynb", "50_demand_map.ipynb", "50_demand_map.html", "report.html", "notes.ipynb"):
        (run / name).write_text("")
    assert run.passports() == [tmp_path / "arms/a/passport.json"]
    assert [p.relative_to(tmp_path).as_posix() for p in run.notebooks()] == [
        "arms/a/30_load_sweep.ipynb", "arms/b/30_load_sweep.ipynb", "40_analysis.ipynb", "50_demand_map.ipynb"]
    assert [p.relative_to(tmp_path).as_posix() for p in run.pages()] == [
        "arms/a/30_load_sweep.html", "arms/b/30_load_sweep.html", "50_demand_map.html"]


def test_layout_of_a_comparison():
    default = ComparisonDir.new("quickstart", ["reference", "avx2-host"])
    assert default.path == OUTPUTS_DIR / "quickstart" / "compare-reference-vs-avx2-host"
    assert OUTPUTS_DIR == REPO_ROOT / "outputs" and OUTPUTS == Path("outputs")
    out = ComparisonDir("elsewhere/cmp")
    assert out.notebook() == Path("elsewhere/cmp/60_compare.ipynb")
    assert (out.report, out.figures, out.comparison) == (
        Path("elsewhere/cmp/report.html"), Path("elsewhere/cmp/figures"), Path("elsewhere/cmp/comparison.json"))
    assert str(out) == "elsewhere/cmp" and out == ComparisonDir(Path("elsewhere/cmp")) != RunDir("elsewhere/cmp")


def test_the_outputs_root_names_its_index_and_lists_a_campaigns_runs_latest_first(tmp_path):
    import os

    from stackbook.evidence.rundir import OutputsRoot

    root = OutputsRoot(tmp_path)
    assert root.index_page == tmp_path / "index.html"
    assert root.runs("none-yet") == []
    for i, name in enumerate(("older", "newer")):
        run = tmp_path / "camp" / name
        run.mkdir(parents=True)
        (run / "manifest.json").write_text("{}")
        os.utime(run / "manifest.json", (1_000 + i, 1_000 + i))
    (tmp_path / "camp" / "no-manifest").mkdir()
    assert [r.name for r in root.runs("camp")] == ["newer", "older"]
