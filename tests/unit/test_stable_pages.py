"""A run rendered again changes its pages only where their content changed: a cell whose id was
random (the cell papermill injects, the page's own box) gets one from its position and text, the
source's cells keep theirs, and a table's style id comes from its content. A page needs no network."""
import re

import nbformat
import pandas as pd
from stackbook.analysis.tables import readable
from stackbook.notebook_sources import cell_id, stable_ids
from stackbook.report_page import write_page

ARM_NOTEBOOK = "outputs/quickstart/reference/arms/llama-cpp/30_load_sweep.ipynb"


def test_a_page_written_twice_is_the_same_page(tmp_path):
    a, b = tmp_path / "a.html", tmp_path / "b.html"
    nb = nbformat.read(ARM_NOTEBOOK, as_version=4)
    for i, cell in enumerate(nb.cells):  # as papermill leaves them: some ids random
        cell["id"] = f"{i:x}deadbeef"[:8]
    src = tmp_path / "30_load_sweep.ipynb"
    nbformat.write(nb, src)
    write_page(src, a)
    write_page(src, b)
    text = a.read_text()
    assert text == b.read_text()
    ids = re.findall(r'id="cell-id=([^"]+)"', text)
    assert ids and all(re.fullmatch(r"\d\d-[0-9a-f]{8}", i) for i in ids)


def test_a_random_id_is_replaced_and_the_sources_ids_are_kept():
    nb = nbformat.read(ARM_NOTEBOOK, as_version=4)
    before = [c.id for c in nb.cells]
    nb.cells[2]["id"] = "c2e96f9f"  # as papermill gives its injected cell
    after = [c.id for c in stable_ids(nb).cells]
    assert after[2] == cell_id(2, nb.cells[2].source)
    assert [a for i, a in enumerate(after) if i != 2] == [b for i, b in enumerate(before) if i != 2]


def test_a_readable_table_renders_the_same_html_twice():
    frame = pd.DataFrame({"ttft_ms": [12.345, 67.8], "arm": ["a", "b"]})
    first, again = readable(frame)._repr_html_(), readable(frame.copy())._repr_html_()
    assert first == again and "T_" in first
    assert readable(frame.assign(arm=["a", "c"]))._repr_html_() != first


def test_a_page_loads_nothing_from_the_network(tmp_path):
    """Read offline or behind a firewall, a page is whole: no script, style or font it fetches."""
    page = write_page(ARM_NOTEBOOK, tmp_path / "page.html").read_text()
    assert "<script src=" not in page and "cdnjs" not in page
    fetched = re.findall(r'<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)="(https?:)?//', page)
    imports = re.findall(r'import\s[^;]*?from\s+"https?://', page)
    assert fetched == [] and imports == []


def test_an_arm_page_links_its_report_the_index_its_pages_and_raw_files_and_shows_the_current_passport(tmp_path):
    from pathlib import Path

    arm = Path(ARM_NOTEBOOK).parent
    page = write_page(ARM_NOTEBOOK, tmp_path / "page.html").read_text()
    nav = re.search(r'<p class="stackbook-nav">(.*?)</p>', page).group(1)
    hrefs = re.findall(r'href="([^"]+)"', nav)
    assert hrefs[:2] == ["../../report.html", "../../../../index.html"]
    assert {"20_canaries.html", "passport.md", "requests.jsonl", "engine.log"} <= set(hrefs)
    assert all((arm / h).exists() for h in hrefs), [h for h in hrefs if not (arm / h).exists()]
    # the passport as passport.md holds it now, not as the last repetition's notebook wrote it
    import html
    import json
    stopped = json.loads((arm / "passport.json").read_text())["protocol"]["repetitions"]["stopped"]
    assert "holds it now" in page and html.escape(stopped) in page
