"""An executed notebook as a page a reader opens in a browser: code hidden (kept in the .ipynb),
the papermill parameters shown once in a small "how this was made" box with the command that
remakes the page, sections with nothing to show for this run folded to one line that says why,
a table of contents, and each figure's alt text."""
from __future__ import annotations

import copy
import html
import json
import re
from pathlib import Path

from nbformat.v4 import new_markdown_cell
from stackbook.evidence.harness import describe, uncommitted
from stackbook.evidence.rundir import ANALYSIS_NOTEBOOK, COMPARE_NOTEBOOK, ArmDir, RunDir
from stackbook.locations import DATA_DIR, symbolic
from stackbook.notebook_sources import stable_ids

TEMPLATE = DATA_DIR / "report.html.j2"
ABSENT = "stackbook_absent"  # output metadata key of an Absent display
PARAMETER_TAGS = {"parameters", "injected-parameters"}


class Absent:
    """What a cell displays when its section has nothing to show for this run: one line, the
    reason; a section whose every output is Absent is folded to that line in the page."""

    def __init__(self, reason: str):
        self.reason = reason

    def _repr_markdown_(self):
        return f"*{self.reason}*", {ABSENT: True}

    def __repr__(self) -> str:
        return self.reason


def _heading(cell) -> tuple[int, str] | None:
    if cell.cell_type != "markdown":
        return None
    m = re.match(r"^(#{1,6})\s+(.+)", cell.source.lstrip())
    return (len(m.group(1)), m.group(2).strip()) if m else None


def _is_absent(output) -> bool:
    """IPython keeps a _repr_*_ method's metadata under its MIME type."""
    md = output.get("metadata", {})
    return bool(md.get(ABSENT) or md.get("text/markdown", {}).get(ABSENT))


def _shows_something(output) -> bool:
    if output.get("output_type") == "stream":
        return output.get("name") == "stdout" and bool(output.get("text", "").strip())
    if output.get("output_type") == "error":
        return True
    return not _is_absent(output)


def _absent_reasons(cells) -> list[str]:
    return [o["data"]["text/markdown"].strip("* \n") for c in cells for o in c.get("outputs", [])
            if _is_absent(o) and "text/markdown" in o.get("data", {})]


def fold_empty_sections(nb) -> list[str]:
    """Replace each "## " section whose code cells show nothing (or only Absent lines) by one
    line naming it and why; returns the folded headings."""
    starts = [i for i, c in enumerate(nb.cells) if (_heading(c) or (0,))[0] == 2] + [len(nb.cells)]
    folded, cells, last = [], list(nb.cells[:starts[0]]), starts[0]
    for a, b in zip(starts, starts[1:]):
        section = nb.cells[a:b]
        code = [c for c in section if c.cell_type == "code"]
        if code and not any(_shows_something(o) for c in code for o in c.get("outputs", [])):
            title = _heading(section[0])[1]
            why = "; ".join(_absent_reasons(code)) or "nothing to show for this run"
            folded.append(title)
            cells.append(new_markdown_cell(
                f'<p class="stackbook-absent"><b>{html.escape(title)}</b>: left out: {html.escape(why)}</p>'))
        else:
            cells.extend(section)
        last = b
    nb.cells = cells + list(nb.cells[last:])
    return folded


def anchor(title: str) -> str:
    """The id nbconvert gives a heading (its text, markup dropped, spaces as '-')."""
    from nbconvert.filters.strings import _convert_header_id

    return _convert_header_id(re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", title))


def contents(nb) -> str:
    """A table of contents of the page's "## " sections, as HTML."""
    titles = [h[1] for c in nb.cells if (h := _heading(c)) and h[0] == 2]
    items = "".join(f'<li><a href="#{html.escape(anchor(t))}">{html.escape(re.sub(r"[`*]", "", t))}</a></li>'
                    for t in titles)
    return f'<nav class="stackbook-toc"><b>Contents</b><ol>{items}</ol></nav>' if titles else ""


def remake_command(name: str, parameters: dict, run: Path) -> str:
    """The command that makes this page again, from the notebook and its parameters."""
    rel = symbolic(run)
    if name == ANALYSIS_NOTEBOOK:
        return f"stackbook report {rel}"
    if name == COMPARE_NOTEBOOK:
        return "stackbook compare " + " ".join(parameters.get("run_dirs") or [])
    if name in ("00_decide", "50_demand_map"):
        return f"stackbook attach {rel} {name}"
    manifest = _read(RunDir(run.parent.parent).manifest)
    campaign = manifest.get("campaign_file") or parameters.get("campaign_file", "<campaign>")
    return (f"stackbook run {campaign} --run-id {run.parent.parent.name}; "
            f"an interrupted run continues with stackbook run --resume {symbolic(run.parent.parent)}")


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def run_revision(page_dir: Path) -> dict:
    """The harness revision of the run a page belongs to, from its manifest ({} for a page of no run)."""
    page_dir = Path(page_dir)
    run = page_dir.parent.parent if page_dir.parent.name == "arms" else page_dir
    return _read(RunDir(run).manifest).get("harness") or {}


def made_box(nb, name: str, page_dir: Path) -> str:
    """The small box: which source, with which parameters, the command that remakes it, and the
    harness revision that measured the run."""
    pm = nb.metadata.get("papermill", {})
    params = pm.get("parameters") or {}
    lines = "\n".join(f"{k} = {v!r}" for k, v in params.items()) or "(none: the source's defaults)"
    when = pm.get("end_time", "")[:19].replace("T", " ")
    revision = run_revision(page_dir)
    # Modified code is said on the box's closed line too: a reader sees it without opening the box.
    mark = (f' <span class="stackbook-uncommitted">({html.escape(uncommitted(revision))})</span>'
            if revision.get("modified") else "")
    measured = f"<p>Measured by {html.escape(describe(revision))}.</p>" if revision else ""
    return (f'<details class="stackbook-made"><summary>How this was made{mark}</summary>'
            f"<p><code>notebooks/{html.escape(name)}.py</code> executed by papermill"
            f"{' at ' + html.escape(when) + ' UTC' if when else ''} with these parameters:</p>"
            f"<pre>{html.escape(lines)}</pre><p>Made again with: "
            f"<code>{html.escape(remake_command(name, params, page_dir))}"
            f"</code> (the code of every cell is in <code>{html.escape(name)}.ipynb</code> beside this page).</p>"
            f"{measured}</details>")


PASSPORT_CELL = "passport_md.read_text()"  # the arm notebook's cell that shows its passport


def nav_links(page_dir: Path) -> str:
    """Where a reader goes from this page: the run's report and the index of every run, the
    other pages of this arm, and the raw files beside it (those that exist), as relative links."""
    page_dir = Path(page_dir)
    in_arm = page_dir.parent.name == "arms"
    run = page_dir.parent.parent if in_arm else page_dir
    up = "../../" if in_arm else ""
    links = ([(f"{up}report.html", "the run's report")] if in_arm and (run / "report.html").exists() else [])
    if (run.parent.parent / "index.html").exists():
        links.append((f"{up}../../index.html", "every run"))
    links += [(p.name, p.stem) for p in sorted(page_dir.glob("*.html")) if in_arm and p.stem[:2].isdigit()]
    if in_arm:
        d = ArmDir(page_dir, page_dir.name)
        raw = (d.passport_md, d.passport_json, d.results, d.requests, d.capacity_requests, d.engine_json, d.engine_log)
    else:
        raw = (RunDir(page_dir).manifest, RunDir(page_dir).analysis, RunDir(page_dir).campaign_resolved)
    links += [(p.name, p.name) for p in raw if p.exists()]
    items = " · ".join(f'<a href="{html.escape(href)}">{html.escape(text)}</a>' for href, text in links)
    return f'<p class="stackbook-nav">{items}</p>' if links else ""


def current_passport(nb, page_dir: Path) -> None:
    """The passport an arm notebook displayed is the one written when that repetition ended; the
    page shows passport.md as it stands (rewritten after the run's last round and by every
    re-render), and says so."""
    passport = Path(page_dir) / "passport.md"
    if not passport.exists():
        return
    for cell in nb.cells:
        if cell.cell_type == "code" and PASSPORT_CELL in cell.source:
            note = ("*The passport as `passport.md` holds it now, after the run's last repetition; the notebook "
                    "beside this page keeps the one written when its own repetition ended.*\n\n")
            from nbformat.v4 import new_output
            cell.outputs = [new_output("display_data", data={"text/markdown": note + passport.read_text()})]


def page_notebook(nb, name: str, page_dir: Path):
    """The notebook as its page shows it: parameter cells out, empty sections folded, the "how
    this was made" box and the contents after the first cell that shows something (the summary,
    where the notebook has one) or after the title."""
    nb = copy.deepcopy(nb)
    current_passport(nb, page_dir)
    box = nav_links(page_dir) + made_box(nb, name, page_dir)
    nb.cells = [c for c in nb.cells if not PARAMETER_TAGS & set(c.metadata.get("tags", []))]
    fold_empty_sections(nb)
    first_section = next((i for i, c in enumerate(nb.cells) if (_heading(c) or (0,))[0] == 2), len(nb.cells))
    shown = [i for i, c in enumerate(nb.cells[:first_section]) if c.cell_type == "code" and c.get("outputs")]
    at = (shown[-1] + 1) if shown else 1
    nb.cells.insert(at, new_markdown_cell(box + contents(nb)))
    return stable_ids(nb)


TABLE = re.compile(r"(<table\b[^>]*>\s*(?:<caption\b.*?</caption>\s*)?)"
                   r"<thead>(.*?)</thead>\s*<tbody>(.*?)</tbody>(\s*</table>)", re.S)
ROW = re.compile(r"<tr\b[^>]*>(.*?)</tr>", re.S)
CELL = re.compile(r"<(t[hd])\b([^>]*)>(.*?)</\1>", re.S)
WIDEST = 14  # data columns a 1,400 px page shows with headers that wrap only between words


def _turned(m: re.Match) -> str:
    """One pandas table with more data columns than WIDEST and fewer rows than columns, turned so
    each row becomes a column (a point per column, a figure per row); any other table as it was."""
    head, body = ROW.findall(m.group(2)), [CELL.findall(r) for r in ROW.findall(m.group(3))]
    header = CELL.findall(head[0]) if len(head) == 1 else []
    columns = len(header) - 1
    if (columns <= WIDEST or len(body) >= columns or header[0][0] != "th"
            or any(len(r) != len(header) or r[0][0] != "th" for r in body)):
        return m.group(0)

    def cell(tag: str, attrs: str, text: str, role: str) -> str:
        attrs = re.sub(r"\b(col_heading|row_heading)\b", role, attrs)
        return f"<{tag}{attrs}>{text}</{tag}>"
    top = "<tr>" + cell(*header[0], "blank") + "".join(cell(*r[0], "col_heading") for r in body) + "</tr>"
    rows = ["<tr>" + cell(*header[j], "row_heading") + "".join(cell(*r[j], "") for r in body) + "</tr>"
            for j in range(1, len(header))]
    return f"{m.group(1)}<thead>{top}</thead><tbody>{''.join(rows)}</tbody>{m.group(4)}"


def turn_wide_tables(body: str) -> str:
    """A table too wide for the page (a point per row, dozens of figures across) reads turned:
    figures down, points across, so a reader never scrolls sideways to find a column."""
    return TABLE.sub(_turned, body)


HEADER_CELL = re.compile(r"(<th\b[^>]*>)(.*?)(</th>)", re.S)
TEXT_OUTSIDE_TAGS = re.compile(r"([^<>]+)(?=<|$)")


def breakable_headers(body: str) -> str:
    """Table headers may wrap after an underscore or a slash (`requests_client`, `mean/max`): a
    `<wbr>` there, in the text only, so a wide table fits the page by wrapping its headers."""
    def mark(m: re.Match) -> str:
        text = TEXT_OUTSIDE_TAGS.sub(lambda t: re.sub(r"([_/])(?=\w)", r"\1<wbr>", t.group(1)), m.group(2))
        return m.group(1) + text + m.group(3)
    return HEADER_CELL.sub(mark, body)


def write_page(notebook: Path, html_path: Path, title: str | None = None) -> Path:
    """An executed notebook as one HTML page: figures embedded with alt text, code hidden, links
    relative to where the page lies."""
    import nbformat
    from nbconvert import HTMLExporter

    notebook = Path(notebook)
    nb = nbformat.read(notebook, as_version=4)
    run = notebook.resolve().parent
    title = title or f"{notebook.stem} · {run.name} · stackbook"
    exporter = HTMLExporter(template_file=str(TEMPLATE), exclude_input=True, exclude_input_prompt=True,
                            exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(page_notebook(nb, notebook.stem, notebook.parent),
                                          resources={"metadata": {"name": title}})
    Path(html_path).write_text(breakable_headers(turn_wide_tables(body)))
    return Path(html_path)


def notebook_pages(run_dir: Path) -> list[Path]:
    """The executed notebooks of a run directory that get a page beside them (the analysis has
    report.html instead)."""
    return [p for p in RunDir(run_dir).notebooks() if p.stem != ANALYSIS_NOTEBOOK]
