"""A run rendered again changes its pages only where their content changed: a cell whose id was
random (the cell papermill injects, the page's own box) gets one from its position and text, the
source's cells keep theirs, and a table's style id comes from its content."""
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
