"""A table too wide for a 1,400 px page is turned on the page (points across, figures down), and
table headers may wrap after an underscore or a slash; narrower or taller tables stay as they are."""
import re

import pandas as pd
from stackbook.analysis.tables import readable
from stackbook.report_page import WIDEST, breakable_headers, turn_wide_tables, write_page

ARM_NOTEBOOK = "outputs/four-engines/reference/arms/vllm-cpu/30_load_sweep.ipynb"


def _table(columns: int, rows: int) -> str:
    frame = pd.DataFrame({f"figure_{j}_ms": [float(10 * i + j) for i in range(rows)] for j in range(columns)},
                         index=[f"c{i + 1}-r0" for i in range(rows)])
    return readable(frame)._repr_html_()


def _grid(page: str) -> list[list[str]]:
    """The text of each row's cells, header row first."""
    return [[re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[hd]\b[^>]*>(.*?)</t[hd]>", row, re.S)]
            for row in re.findall(r"<tr\b[^>]*>(.*?)</tr>", page, re.S)]


def test_a_table_wider_than_the_page_is_turned_points_across_figures_down():
    before = _grid(_table(WIDEST + 1, 3))
    after = _grid(turn_wide_tables(_table(WIDEST + 1, 3)))
    assert before[0][1] == "figure 0 (ms)" and [r[0] for r in before[1:]] == ["c1-r0", "c2-r0", "c3-r0"]
    assert after[0][1:] == ["c1-r0", "c2-r0", "c3-r0"]
    assert [r[0] for r in after[1:]] == [f"figure {j} (ms)" for j in range(WIDEST + 1)]
    assert after[1 + 4][1:] == [before[1][1 + 4], before[2][1 + 4], before[3][1 + 4]] == ["4", "14", "24"]


def test_a_table_that_fits_or_has_more_rows_than_columns_stays_as_it_is():
    for html in (_table(WIDEST, 3), _table(WIDEST + 1, WIDEST + 1)):
        assert turn_wide_tables(html) == html


def test_a_header_may_wrap_after_an_underscore_or_a_slash_but_cells_and_attributes_are_untouched():
    html = '<tr><th class="col_heading level0">requests_client mean/max</th><td title="a_b">x_y</td></tr>'
    assert breakable_headers(html) == ('<tr><th class="col_heading level0">requests_<wbr>client mean/<wbr>max</th>'
                                       '<td title="a_b">x_y</td></tr>')


def test_the_committed_vllm_arm_page_turns_its_three_widest_tables(tmp_path):
    """Its client-against-engine table (18 columns), host-cost table (26) and points table (17)
    once scrolled sideways at 1,400 px; on the page each has a point per column."""
    page = write_page(ARM_NOTEBOOK, tmp_path / "page.html").read_text()
    heads = [g[0] for t in re.findall(r"<table\b.*?</table>", page, re.S) if (g := _grid(t))]
    turned = [h for h in heads if h[1:] == ["c1-r0", "c2-r0", "c1-r1", "c2-r1"]]
    assert len(turned) == 3
