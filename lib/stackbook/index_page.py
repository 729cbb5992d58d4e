"""outputs/index.html: a dashboard of every run and comparison: campaign, model, arms with their
labels, host and instruction sets, harness revision, date, status, and the whole decision (or
verdict), collapsed but never cut; links to the report and every notebook page of the run."""
from __future__ import annotations

import html
import time
from collections import Counter
from pathlib import Path

from pydantic import BaseModel

from stackbook.analysis.answer import answer
from stackbook.analysis.answer_facts import other_runs, run_facts
from stackbook.loadgen.load_point import load_unit
from stackbook.evidence.files import read_json
from stackbook.evidence.rundir import REPORT, ComparisonDir, OutputsRoot, RunDir
from stackbook.locations import OUTPUTS_DIR
# The vector extensions that decide which kernels an engine may use, widest first.
ISA_NAMES = (("amx_bf16", "AMX"), ("avx512_bf16", "AVX-512 BF16"), ("avx512f", "AVX-512"), ("avx2", "AVX2"),
             ("neon", "NEON"), ("asimd", "NEON"))


class RunEntry(BaseModel):
    """One row of outputs/index.html."""
    path: str
    campaign: str
    kind: str  # "run" or "comparison"
    date: str
    host: str
    verdict: str  # the first line, kept for a one-line listing
    report: str | None
    model: str = "-"
    isa: str = "-"
    harness: str = "-"
    status: str = "-"
    arms: dict[str, str] = {}  # arm -> label
    verdict_lines: list[str] = []
    decisions: list[dict] = []
    load_unit: str = "concurrency"  # the verdict's name for a decision's load (loadgen.load_point.load_unit)
    pages: dict[str, str] = {}  # notebook page -> path relative to outputs/
    answer: list[str] = []  # the report's five answers, as its first screen words them (analysis.answer)


def isa_summary(flags: list[str] | str | None) -> str:
    """The widest vector extension the host has (what its engines' kernels may use)."""
    if not flags:
        return "-"
    have = set(flags.split() if isinstance(flags, str) else flags)
    return next((name for flag, name in ISA_NAMES if flag in have), "-")


def _host(run: Path) -> tuple[str, str]:
    """(CPU and count, its instruction sets) from the first passport naming a host (a run sized
    for other hardware names the one its arithmetic ran on)."""
    for passport in RunDir(run).passports():
        ident = (read_json(passport, {}) or {}).get("identity", {})
        h = ident.get("host") or {}
        h = h.get("arithmetic_done_on", h) if isinstance(h, dict) else {}
        if h.get("cpu"):
            cpus = f", {h['logical_cpus']} CPUs" if h.get("logical_cpus") else ""
            sized = (ident.get("host") or {}).get("sized_for")
            where = f" (sized for {sized})" if sized else ""
            return f"{h['cpu']}{cpus}{where}", isa_summary(h.get("isa_flags") or h.get("instruction_sets")
                                                           or h.get("isa"))
    return "-", "-"


def _passport_field(run: Path, *keys: str) -> str:
    for passport in RunDir(run).passports():
        v = read_json(passport, {}) or {}
        for k in keys:
            v = v.get(k, {}) if isinstance(v, dict) else {}
        if v and not isinstance(v, dict):
            return str(v)
    return "-"


def _model(run: Path) -> str:
    """The model the campaign names (its resolved copy in the run), else the passports'."""
    import yaml

    try:
        resolved = yaml.safe_load(RunDir(run).campaign_resolved.read_text()) or {}
        return str((resolved.get("model") or {}).get("name") or _passport_field(run, "identity", "model", "name"))
    except (OSError, yaml.YAMLError):
        return _passport_field(run, "identity", "model", "name")


def _pages(path: Path, outputs: Path) -> dict[str, str]:
    pages = RunDir(path).pages()
    return {p.relative_to(path).with_suffix("").as_posix(): p.relative_to(outputs).as_posix() for p in pages}


def run_entry(path: Path, outputs: Path = OUTPUTS_DIR) -> RunEntry | None:
    """The index row for a run or comparison directory; None for anything else."""
    run, compared = RunDir(path), ComparisonDir(path)
    manifest = read_json(run.manifest)
    comparison = read_json(compared.comparison)
    if manifest is None and comparison is None:
        return None
    rel = path.relative_to(outputs).as_posix()
    link = f"{rel}/{REPORT}" if run.report.exists() else None
    if comparison is not None:
        stamp = compared.comparison.stat().st_mtime
        lines = comparison.get("verdict", [])
        return RunEntry(path=rel, campaign=comparison["campaign"], kind="comparison",
                        date=time.strftime("%Y-%m-%d", time.gmtime(stamp)), host=", ".join(comparison["runs"]),
                        verdict=" ".join(lines[:1]) or "-", verdict_lines=lines, report=link, status="comparison")
    analysis = read_json(run.analysis, {}) or {}
    lines = analysis.get("verdict") or []
    created = manifest.get("created_unix")
    host, isa = _host(path)
    facts = run_facts(run, analysis=analysis, outputs=outputs)
    return RunEntry(path=rel, campaign=manifest["campaign"], kind="run",
                    date=time.strftime("%Y-%m-%d", time.gmtime(created)) if created else "-", host=host, isa=isa,
                    verdict=lines[0] if lines else f"(no analysis.json: stackbook report {rel})",
                    verdict_lines=lines, decisions=analysis.get("decisions") or [], report=link,
                    load_unit=load_unit([p.get("rate") for p in analysis.get("points") or []],
                                        [p.get("speedup") for p in analysis.get("points") or []]),
                    model=_model(path),
                    harness=_passport_field(path, "protocol", "harness"), status=manifest.get("status", "-"),
                    arms={n: str(a.get("label", "-")) for n, a in (analysis.get("arms") or {}).items()}
                    or {n: a.get("status", "-") for n, a in (manifest.get("arms") or {}).items()},
                    pages=_pages(path, outputs),
                    answer=[f"{s.question}? {s.text}" for s in answer(facts, other_runs(path, manifest["campaign"],
                                                                                      outputs))] if analysis else [])


def index_entries(outputs: Path = OUTPUTS_DIR) -> list[RunEntry]:
    entries = [run_entry(p, outputs) for p in sorted(outputs.glob("*/*")) if p.is_dir()]
    return [e for e in entries if e is not None]


def decision_lines(e: RunEntry) -> tuple[str, list[str]]:
    """The collapsed summary and every line under it. A decision row names its load and its pair
    (its own text does not); the summary counts the outcomes over every load, so no one load's
    line stands for the run."""
    if not e.decisions:
        lines = e.verdict_lines
        return (lines[0] if len(lines) == 1 else f"the verdict, {len(lines)} lines (one per load and pair)"), lines
    items = [f"{e.load_unit} {d.get('load'):g}, {d.get('arm_a')} against {d.get('arm_b')}: "
             + (d.get("text") or f"{d.get('metric')}: {d.get('decision')}") for d in e.decisions]
    outcomes = Counter("ranked" if d.get("leader") else str(d.get("decision")) for d in e.decisions)
    loads = ", ".join(f"{x:g}" for x in sorted({d.get("load") for d in e.decisions}))
    summary = (f"{len(e.decisions)} comparisons at {e.load_unit} {loads}: "
               + ", ".join(f"{n} {what}" for what, n in outcomes.most_common()))
    return summary, items


def _decision(e: RunEntry) -> str:
    """The whole decision (rows, else verdict lines) inside <details>, a summary over all of it."""
    summary, items = decision_lines(e)
    if not items:
        return html.escape(e.verdict)
    body = "".join(f"<li>{html.escape(str(i))}</li>" for i in items)
    return (f"<details><summary>{html.escape(summary)}</summary><ul>{body}</ul></details>"
            if len(items) > 1 else html.escape(str(items[0])))


def _answer(e: RunEntry) -> str:
    """The report's answers, as its first screen words them, above the whole decision."""
    parts = [line.partition("? ") for line in e.answer]
    return "".join(f"<p><b>{html.escape(q)}?</b> {html.escape(text)}</p>" for q, _, text in parts)


def _row(e: RunEntry) -> str:
    link = f'<a href="{html.escape(e.report)}">{html.escape(e.path)}</a>' if e.report else html.escape(e.path)
    pages = " ".join(f'<a href="{html.escape(p)}">{html.escape(n)}</a>' for n, p in e.pages.items())
    arms = "<br>".join(f"{html.escape(n)} <small>({html.escape(label)})</small>" for n, label in e.arms.items()) or "-"
    cells = [html.escape(e.campaign), link + (f"<br><small>{pages}</small>" if pages else ""), e.kind,
             html.escape(e.model), arms, html.escape(e.host), html.escape(e.isa), html.escape(e.harness), e.date,
             html.escape(e.status), _answer(e) + _decision(e)]
    return "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


STYLE = ("body{font-family:sans-serif;font-size:14px;margin:1.5em}table{border-collapse:collapse;width:100%}"
         "td,th{border:1px solid #ccc;padding:4px 6px;text-align:left;vertical-align:top}"
         "td:last-child{width:40%}details summary{cursor:pointer}small a{margin-right:.5em;display:inline-block}")
HEADERS = ("campaign", "run (report, notebook pages)", "kind", "model", "arms (label)", "host", "ISA",
           "harness", "date (UTC)", "status", "the answer, then the decision (click for every line)")


def write_index(outputs: Path = OUTPUTS_DIR) -> Path:
    """outputs/index.html: every run and comparison as one row of the dashboard."""
    rows = "\n".join(_row(e) for e in index_entries(outputs))
    head = "".join(f"<th>{h}</th>" for h in HEADERS)
    page = (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>stackbook runs</title><style>{STYLE}'
            "</style></head><body><h1>Runs</h1><p>Every run directory under <code>outputs/</code>: its report, "
            "the pages of its notebooks, and its whole decision (or verdict), one line per load.</p>"
            f"<table><thead><tr>{head}</tr></thead><tbody>\n{rows}\n</tbody></table></body></html>\n")
    out = OutputsRoot(outputs).index_page
    out.write_text(page)
    return out
