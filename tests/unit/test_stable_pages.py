"""A run rendered again changes its pages only where their content changed: cell ids come from
each cell's position and text (the cell papermill injects and the page's own box included), and a
table's style id from its content, where both were random before."""
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


def test_every_cell_gets_the_id_its_position_and_text_give():
    nb = stable_ids(nbformat.read(ARM_NOTEBOOK, as_version=4))
    assert [c.id for c in nb.cells] == [cell_id(i, c.source) for i, c in enumerate(nb.cells)]


def test_a_readable_table_renders_the_same_html_twice():
    frame = pd.DataFrame({"ttft_ms": [12.345, 67.8], "arm": ["a", "b"]})
    first, again = readable(frame)._repr_html_(), readable(frame.copy())._repr_html_()
    assert first == again and "T_" in first
    assert readable(frame.assign(arm=["a", "c"]))._repr_html_() != first
