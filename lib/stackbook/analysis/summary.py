"""The first screen of a campaign report: the answer block (which arm, how sure, inside which SLO,
at what cost, on which host: analysis.answer), then the question, the decision per load, each
arm's label with its reason, the headline figure and the links to each arm's evidence, so a reader
has the answer before any detail."""
from __future__ import annotations

import html
import os
import re
from pathlib import Path

import pandas as pd

from stackbook.analysis import comparison, plots
from stackbook.analysis.answer import Sentence, answer
from stackbook.analysis.answer_facts import other_runs, run_facts
from stackbook.analysis.fairness import fairness_table
from stackbook.analysis.figure_style import short_reason
from stackbook.analysis.routing_findings import first_screen_lines
from stackbook.analysis.tables import format_number
from stackbook.evidence.files import read_json
from stackbook.evidence.label import Label
from stackbook.evidence.rundir import ARM_NOTEBOOKS, RunDir
from stackbook.loadgen.load_point import Load
from stackbook.locations import REPO_ROOT

# Pages of a run a reader may open beside the report, when the run has them (attached notebooks).
RUN_PAGES = {"00_decide": "the team's decision record", "50_demand_map": "the measured demand map",
             "60_compare": "the comparison across runs"}
ARM_PAGES = {"10_sizing": "sizing", "20_canaries": "canaries", "30_load_sweep": "sweep"}
# The notebooks that teach the method a report applies, and what each teaches; a run's own page
# where it rendered one, else the workbook's source notebook.
METHOD_PAGES = {"00_decide": "deciding before measuring (Little's law, the memory wall)",
                "10_sizing": "sizing (weights, KV cache, live sequences)",
                "50_demand_map": "the demand map (MVA, Kingman: where throughput tops out)"}
METHOD_PATH_DOC = "docs/method-path.md"
DECISION_TABLE_ID = "decision-table"
ANSWER_ID = "answer"
BELOW = ("Below, in this order: the question and the decision per load (every compared figure with its interval), "
         "each arm's label and evidence, the headline figure, then the sections listed under Contents.")


def question(campaign, arms: dict) -> str:
    """What the campaign asks, in one sentence: model, hardware, load."""
    protocol = campaign.protocol
    levels = protocol.arrival.load_levels()
    if "sweep" not in protocol.stages:
        return (f"Which stack serves <b>{html.escape(campaign.model.name)}</b> best on "
                f"<b>{html.escape(hardware(campaign, arms))}</b>? Answered by arithmetic: this campaign runs no load.")
    loads = [Load.of(lv) for lv in levels]
    if all(ld.closed_loop for ld in loads):
        counts = [ld.value for ld in loads]
        load = ("one client at a time" if counts == [1] else
                "a closed loop of " + ", ".join(map(str, counts)) + " concurrent clients")
    elif all(ld.scheduled for ld in loads):
        load = f"{protocol.arrival.kind} arrivals at " + ", ".join(f"{ld.value:g}" for ld in loads) + " req/s"
    else:
        load = protocol.arrival.load_words()
    measured = sorted({protocol.arrival.measured_at(lv, protocol) for lv in levels})
    return (f"Which stack serves <b>{html.escape(campaign.model.name)}</b> best on "
            f"<b>{html.escape(hardware(campaign, arms))}"
            f"</b> under {html.escape(load)}, {', '.join(map(str, measured))} measured requests per point?")


def hardware(campaign, arms: dict) -> str:
    if campaign.hardware.accelerator != "this-cpu":
        return campaign.hardware.accelerator
    for a in arms.values():
        host = (a.get("passport") or {}).get("identity", {}).get("host") or {}
        if host.get("cpu"):
            cpus = f", {host['logical_cpus']} CPUs" if host.get("logical_cpus") else ""
            return f"{host['cpu']}{cpus}"
    return "this CPU"


def decision_frame(decisions: list[dict]) -> pd.DataFrame:
    """The decision rows as a reader's table: per load and figure, what the rule says (who is
    ahead and by how much, or no difference, or undecided), the ratio with its interval and the
    sample it rests on."""
    from stackbook.analysis.decision import COMPARED_BY_NAME, confidence_text

    rows = []
    for d in decisions:
        ratio = d.get("ratio")
        interval = (f"{format_number(ratio)} [{format_number(d.get('lo'))}, {format_number(d.get('hi'))}]"
                    if ratio is not None and d.get("lo") is not None else format_number(ratio) if ratio else "–")
        figure = COMPARED_BY_NAME.get(d.get("metric"))
        text = str(d.get("text", ""))
        says = text.split(": ", 1)[1] if figure and text.startswith(figure.label + ": ") else text
        rows.append({"load": d.get("load"), "figure": figure.label if figure else d.get("metric"),
                     "arms (a vs b)": f"{d.get('arm_a')} vs {d.get('arm_b')}",
                     "decision": d.get("decision"), "what the rule says": says,
                     f"ratio a/b [{confidence_text(d.get('confidence') or 0.95)} interval]": interval,
                     "from this load alone": (f"[{format_number(d['this_load_lo'])}, "
                                              f"{format_number(d['this_load_hi'])}]"
                                              if d.get("this_load_lo") is not None else "–"),
                     "how the interval was built": d.get("method", "–"),
                     "repetitions, requests": f"{d.get('repetitions_a')}+{d.get('repetitions_b')} reps, "
                                              f"{d.get('requests_a')}+{d.get('requests_b')} req",
                     "text": text})
    return pd.DataFrame(rows)


VERDICT_LOAD = re.compile(r"^At (?P<load>[^:]+): (?P<text>.*)$", re.S)


def verdict_frame(verdict: list[str]) -> pd.DataFrame:
    """The verdict lines as one row per load ("At concurrency 4: ..."), the rest as campaign-wide."""
    rows = []
    for line in verdict:
        m = VERDICT_LOAD.match(line)
        rows.append({"load": m["load"], "verdict": m["text"]} if m else {"load": "all loads", "verdict": line})
    return pd.DataFrame(rows)


def _html_table(frame: pd.DataFrame, table_id: str | None = None, hover: str | None = None) -> str:
    """A small HTML table; `hover` names a column shown as each row's tooltip instead of a cell."""
    cols = [c for c in frame.columns if c != hover]
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
    body = []
    for _, r in frame.iterrows():
        title = f' title="{html.escape(str(r[hover]))}"' if hover and r.get(hover) else ""
        body.append(f"<tr{title}>" + "".join(f"<td>{c if str(c).startswith('<') else html.escape(str(c))}</td>"
                                             for c in (r[col] for col in cols)) + "</tr>")
    ident = f' id="{table_id}"' if table_id else ""
    return (f'<table class="stackbook-summary"{ident}><thead><tr>{head}</tr></thead><tbody>'
            + "".join(body) + "</tbody></table>")


def label_reason(name: str, arm_analysis, manifest_arm: dict) -> str:
    """Why the arm carries its label, in a few words."""
    label = arm_analysis.label
    if label is Label.ACCEPTED:
        left = arm_analysis.points_left_out
        return ("canaries passed, protocol matches; " + (f"{len(left)} point(s) not ranked: "
                + ", ".join(f"{p} {short_reason(why)}" for p, why in left.items()) if left else "every point ranked"))
    if label is Label.NOT_COMPARABLE:
        return "differs from the others in " + (", ".join(arm_analysis.differs) or "its protocol")
    skipped = (manifest_arm.get("notebooks", {}).get("30_load_sweep") or {}).get("reason")
    detail = manifest_arm.get("error") or skipped
    return f"{label.reason}: {detail}" if detail else label.reason


def evidence_links(run: RunDir, name: str) -> str:
    """Links to the arm's rendered notebooks and raw files (those it has)."""
    d = run.arm(name)
    links = [(what, d.notebook(nb).with_suffix(".html")) for nb, what in ARM_PAGES.items()
             if nb in ARM_NOTEBOOKS and d.notebook(nb).exists()]
    links += [("raw requests", d.requests), ("engine log", d.engine_log), ("passport", d.passport_md)]
    return ", ".join(f'<a href="{html.escape(d.link(p))}">{what}</a>' for what, p in links if p.exists()
                     or p.suffix == ".html")


def run_page_links(run: RunDir) -> str:
    pages = [(what, run.notebook(nb)) for nb, what in RUN_PAGES.items() if run.notebook(nb).exists()]
    return ", ".join(f'<a href="{nb.stem}.html">{what}</a>' for what, nb in pages)


def _workbook_file(run: RunDir, target: Path) -> tuple[str, bool]:
    """A file of the workbook as a run's page reaches it: a link relative to the run where the run
    lies inside the repository (the committed runs), else its path in the repository as text, so
    no page carries a path of this machine."""
    here = run.path.resolve()
    if here.is_relative_to(REPO_ROOT.resolve()):
        return os.path.relpath(target, here), True
    return target.relative_to(REPO_ROOT).as_posix(), False


def method_links(run: RunDir) -> list[tuple[str, str, bool]]:
    """(what it teaches, where, whether a link) for each teaching notebook and the docs' path from
    a report to the seed's method: the run's own page where it has one, else the workbook's
    notebook source (jupytext percent: its prose reads as text)."""
    out = []
    for nb, what in METHOD_PAGES.items():
        own = [run.notebook(nb).with_suffix(".html")] + [run.arm(a).notebook(nb).with_suffix(".html")
                                                         for a in sorted(p.name for p in run.arms_dir.glob("*"))]
        page = next((p for p in own if p.exists()), None)
        out.append((what, *((page.relative_to(run.path).as_posix(), True) if page
                            else _workbook_file(run, REPO_ROOT / "notebooks" / f"{nb}.py"))))
    out.append(
        ("from this report to the seed's method, step by step", *_workbook_file(run, REPO_ROOT / METHOD_PATH_DOC))
    )
    return out


def method_html(run: RunDir) -> str:
    links = "; ".join(f'<a href="{html.escape(where)}">{html.escape(what)}</a>' if linked
                      else f"{html.escape(what)} (<code>{html.escape(where)}</code>)"
                      for what, where, linked in method_links(run))
    return f'<p class="stackbook-method"><small>The method, taught: {links}.</small></p>'


class Summary:
    """The summary as one HTML block (displayed before the headline figure)."""

    def __init__(self, body: str):
        self.body = body

    def _repr_html_(self) -> str:
        return self.body

    def __repr__(self) -> str:
        return re.sub(r"<[^>]+>", " ", self.body)


def answer_html(sentences: list[Sentence], method: str = "") -> str:
    """The answer block: one line per question, the question in bold, then what lies below and
    where the method is taught."""
    items = "".join(f"<li><b>{html.escape(s.question)}?</b> {html.escape(s.text)}</li>" for s in sentences)
    return (f'<div class="stackbook-answer" id="{ANSWER_ID}"><p><b>The answer</b></p><ul>{items}</ul>'
            f"<p><small>{html.escape(BELOW)}</small></p>{method}</div>")


def run_answer(run: RunDir, campaign, result) -> list[Sentence]:
    """The answer from this analysis (fresher than analysis.json) and the other runs of its campaign."""
    facts = run_facts(run, analysis=result.model_dump(), campaign=campaign.model_dump())
    return answer(facts, other_runs(run, campaign.name))


def summary_html(run: RunDir, campaign, arms: dict, result) -> str:
    manifest_arms = (read_json(run.manifest, {}) or {}).get("arms", {})
    decisions = list(getattr(result, "decisions", None) or [])
    if decisions:
        decision = _html_table(decision_frame(decisions), DECISION_TABLE_ID, hover="text")
        rule = "Decided by the campaign's decision rule (hover a row for its sentence)."
    else:
        decision = _html_table(verdict_frame(result.verdict), DECISION_TABLE_ID)
        rule = "This run's analysis has no decision rows; its verdict lines read per load."
    labels = pd.DataFrame([{"arm": n, "engine": a.engine, "label": a.label.value,
                            "why": label_reason(n, a, manifest_arms.get(n, {})),
                            "evidence": evidence_links(run, n)} for n, a in result.arms.items()])
    pages = run_page_links(run)
    routed = first_screen_lines(getattr(result, "routing", None) or {})
    routing = ("<h3>Replicas behind a router</h3><ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in routed)
               + "</ul>") if routed else ""
    return (answer_html(run_answer(run, campaign, result), method_html(run)) +
            f'<div class="stackbook-first-screen"><p class="stackbook-question">{question(campaign, arms)}'
            f" <small>(campaign <code>{html.escape(campaign.name)}</code>: {html.escape(campaign.description)})"
            f"</small></p><h3>Decision per load</h3>{decision}<p><small>{rule} {html.escape(result.ranking_rule)}"
            f"</small></p>{routing}<h3>Arms</h3>{_html_table(labels) if not labels.empty else '<p>No arm ran.</p>'}"
            + (f"<p>Also in this run: {pages}.</p>" if pages else "") + "</div>")


def show(run_dir: str) -> None:
    """Display the answer block, the summary and the headline figure (saved as figures/headline.png)."""
    from IPython.display import display

    path = Path(run_dir)
    run = RunDir.existing(path if path.is_absolute() else REPO_ROOT / path)
    campaign, arms = comparison.load_run(run)
    result = comparison.analyse_run(run)
    display(Summary(summary_html(run, campaign, arms, result)))
    df = comparison.comparison_frame(arms, fairness_table(campaign, arms))
    figure = plots.headline(df, run.figures)
    if figure is not None:
        display(figure)
