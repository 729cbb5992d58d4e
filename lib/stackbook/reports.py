"""Reports after the fact: a run's analysis and report rendered again from its recorded evidence
(no engine starts), comparisons across runs, and outputs/index.html listing every run."""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from stackbook.evidence.files import file_sha256
from stackbook.evidence.manifest import ManifestFile
from stackbook.evidence.rundir import ANALYSIS_NOTEBOOK, COMPARE_NOTEBOOK, ComparisonDir, RunDir
from stackbook.locations import REPO_ROOT, symbolic
from stackbook.notebook_execution import execute_notebook
from stackbook.report_page import notebook_pages, write_page



def _repo_relative(path: str | os.PathLike) -> str:
    """Paths handed to notebooks are relative to the repository root when they can be (portable records)."""
    p = Path(path).resolve()
    try:
        return str(p.relative_to(REPO_ROOT))
    except ValueError:
        return str(p)


def write_report(notebook: Path, html_path: Path) -> None:
    """The executed analysis (or comparison) notebook as one HTML report titled with its campaign
    and run, and every other executed notebook of that directory as a page beside its .ipynb, so
    the report's links open pages, not raw JSON."""
    notebook = Path(notebook)
    run = notebook.resolve().parent
    write_page(notebook, html_path, title=f"{run.parent.name} · {run.name} · stackbook report")
    for other in notebook_pages(notebook.parent):
        if other.resolve() != notebook.resolve():
            write_page(other, other.with_suffix(".html"))


def run_analysis(run_dir: RunDir, manifest: ManifestFile) -> None:
    """Execute the analysis notebook over a run and write its report; the manifest records how it
    went (analysis.json is written even when the notebook failed)."""
    out = run_dir.analysis_notebook
    try:
        secs = execute_notebook(ANALYSIS_NOTEBOOK, out, {"run_dir": str(run_dir)})
        manifest.data["analysis"] = {"status": "ok", "seconds": round(secs, 1), "sha256": file_sha256(out)}
        write_report(out, run_dir.report)
    except Exception as err:  # the executed notebook keeps the traceback; the manifest says where
        manifest.data["analysis"] = {"status": "failed", "error": symbolic(str(err))[-3000:]}
        if not run_dir.analysis.exists():
            try:  # analysis.json is plain data: write it even when a figure failed the notebook
                from stackbook.analysis.comparison import write_analysis
                write_analysis(run_dir)
            except Exception as inner:  # noqa: BLE001 - the manifest already says the analysis failed
                manifest.data["analysis"]["error"] += f"; analysis.json not written: {symbolic(str(inner))[-500:]}"
    manifest.save()


def refigure_points(run: RunDir, campaign) -> None:
    """Each arm's sweep points recomputed from its records by today's code (measure/refigure.py)."""
    from stackbook.evidence.files import read_json, write_json_atomic
    from stackbook.evidence.harness import current_revision
    from stackbook.loadgen.records import read_records
    from stackbook.measure.refigure import refigured_sweep

    revision = current_revision()
    for arm in campaign.arms:
        d = run.arm(arm.name)
        results = read_json(d.results)
        if not results or not (results.get("sweep") or {}).get("points"):
            continue
        records = read_records(d.requests, latest_attempt=True)
        results["sweep"] = refigured_sweep(results["sweep"], records, campaign.protocol_for(arm), revision)
        write_json_atomic(d.results, results)


def rerender(run_dir: str | os.PathLike) -> RunDir:
    """Recompute each point's figures from its records, then execute the analysis notebook again
    and rewrite results.json, passports, analysis.json, figures/ and report.html (and their hashes
    in the manifest): the run as today's workbook computes and draws it."""
    from stackbook.config.loading import load_campaign
    from stackbook.run_checks.passport import write_passport
    from stackbook.evidence.portable import make_portable

    run = RunDir.existing(run_dir)
    run = RunDir(_repo_relative(run.path))
    manifest = ManifestFile(run, campaign=None, campaign_file="")
    campaign = load_campaign(run.campaign_resolved)
    refigure_points(run, campaign)
    for arm in campaign.arms:  # passports are derived from the records too: written by today's code
        if run.arm(arm.name).results.exists():
            write_passport(campaign, arm, run.arm(arm.name),
                           engine_died=manifest.data["arms"].get(arm.name, {}).get("status") == "engine_died")
    run_analysis(run, manifest)
    make_portable(run, [])
    if manifest.data.get("finished_unix"):
        from stackbook.evidence.phase_times import phase_times
        manifest.data["phase_seconds"] = phase_times(manifest.data)
    if "outputs" in manifest.data:
        manifest.record_outputs(run)
        manifest.save()
    if manifest.data["analysis"].get("status") != "ok":
        raise RuntimeError(f"the analysis of {run} failed: {manifest.data['analysis'].get('error', '')[-500:]}"
                           f" (the executed notebook {run.analysis_notebook} shows the cell)")
    return run


# The notebooks that read a finished run without being part of every campaign, and which of their
# parameters name a place in the run (00_decide needs none: it reads the team's answers). An
# attached notebook's figures go to a folder of their own, apart from the analysis's.
ATTACHABLE: dict[str, dict[str, Callable[[RunDir], Path]]] = {
    "00_decide": {},
    "50_demand_map": {"run_dir": lambda run: run.path, "figures_dir": lambda run: run.figures / "50_demand_map"}}


def _execute_attached(run: RunDir, name: str, parameters: dict | None, note: str) -> dict:
    """Execute one attachable notebook over the run and write its page; the manifest entry it earns."""
    params = {**{param: str(place(run)) for param, place in ATTACHABLE[name].items()}, **(parameters or {})}
    out = run.notebook(name)
    seconds = execute_notebook(name, out, params)
    write_page(out, out.with_suffix(".html"))
    return {"status": "ok", "seconds": round(seconds, 1), "sha256": file_sha256(out),
            "note": note or f"notebooks/{name}.py executed over this run's records"}


def attach(run_dir: str | os.PathLike, name: str, parameters: dict | None = None, note: str = "") -> RunDir:
    """Execute a workbook notebook over a finished run, keep it in the run directory beside the
    analysis and record it in the manifest (`attached`: status, seconds, hash, note) with the
    other outputs' hashes, so a teaching notebook run on real evidence is part of the audit record."""
    from stackbook.evidence.portable import make_portable

    if name not in ATTACHABLE:
        raise ValueError(f"{name!r} cannot be attached to a run; attachable notebooks: {', '.join(ATTACHABLE)}")
    run = RunDir(_repo_relative(RunDir.existing(run_dir).path))
    entry = _execute_attached(run, name, parameters, note)
    make_portable(run, [])
    manifest = ManifestFile(run, campaign=None, campaign_file="")
    manifest.data.setdefault("attached", {})[name] = entry
    manifest.record_outputs(run)
    manifest.save()
    return run


def teaching_pages(campaign) -> list[str]:
    """The attachable notebooks a run of this campaign renders on its own, so a newcomer's first run
    lands on the method: the demand map wherever a closed-loop sweep gives it points to map (its
    Mean Value Analysis predicts closed-loop points)."""
    protocol = campaign.protocol
    return ["50_demand_map"] if "sweep" in protocol.stages and protocol.arrival.kind == "closed_loop" else []


def attach_teaching(run_dir: RunDir, campaign, manifest: ManifestFile) -> None:
    """Before the analysis (whose report then links them): each teaching page of the campaign,
    recorded in the run's manifest; one that fails is recorded as failed and the run goes on."""
    for name in teaching_pages(campaign):
        try:
            entry = _execute_attached(RunDir(_repo_relative(run_dir.path)), name, None,
                                      f"notebooks/{name}.py executed over this run's records by the run itself")
        except Exception as err:  # noqa: BLE001 - a teaching page never fails the measurement
            entry = {"status": "failed", "error": symbolic(str(err))[-1000:]}
        manifest.data.setdefault("attached", {})[name] = entry
    manifest.save()


def compare(run_dirs: list[str | os.PathLike], out: str | os.PathLike | None = None) -> ComparisonDir:
    """Execute the comparison notebook across runs of one campaign into a comparison directory
    (default outputs/<campaign>/compare-<run>-<run>...), with its report."""
    from stackbook.analysis.cross_run import load_runs

    runs = [RunDir.existing(r) for r in run_dirs]
    campaign = load_runs(runs)[0]  # refuses runs of different campaigns, naming them
    target = ComparisonDir(out) if out else ComparisonDir.new(campaign, [r.name for r in runs])
    target = ComparisonDir(_repo_relative(target.create().path))
    notebook = target.notebook(COMPARE_NOTEBOOK)
    execute_notebook(COMPARE_NOTEBOOK, notebook, {"run_dirs": [_repo_relative(r.path) for r in runs],
                                                  "out_dir": str(target)})
    write_report(notebook, target.report)
    return target


from stackbook.index_page import RunEntry, index_entries, run_entry, write_index  # noqa: E402,F401 - the index of runs


def write_comparison_json(out_dir: ComparisonDir, campaign: str, runs: list[str], verdict: list[str]) -> Path:
    """comparison.json: the campaign, the runs compared and the verdict, for the index."""
    path = out_dir.comparison
    path.write_text(json.dumps({"campaign": campaign, "runs": runs, "verdict": verdict}, indent=1) + "\n")
    return path
