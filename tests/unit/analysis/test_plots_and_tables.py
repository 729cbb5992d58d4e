"""Figures are returned (for inline display) and saved, with units on the axes and crosses on the
points that are not ranked; tables carry units in their column names and rounded numbers."""
import pandas as pd
from matplotlib.figure import Figure
from stackbook.analysis import plots
from stackbook.analysis.tables import column_title, format_number, readable


def points():
    return pd.DataFrame([
        {"arm": "a", "label": "accepted", "point": "c1", "discarded": False, "load": 1, "e2e_ms_p50": 100.0,
         "e2e_ms_p99": 150.0, "output_throughput_tok_s": 10.0},
        {"arm": "a", "label": "accepted", "point": "c2", "discarded": True, "load": 2, "e2e_ms_p50": 300.0,
         "e2e_ms_p99": 900.0, "output_throughput_tok_s": 12.0},
        {"arm": "b", "label": "HOLD", "point": "c1", "discarded": False, "load": 1, "e2e_ms_p50": 90.0,
         "e2e_ms_p99": 95.0, "output_throughput_tok_s": 20.0},
    ])


def test_point_status_names_why_a_point_is_not_ranked():
    assert plots.point_status(points()).tolist() == ["accepted", "discarded", "HOLD"]
    with_status = points().assign(status=[None, "invalid load", None])
    assert plots.point_status(with_status).tolist() == ["accepted", "invalid load", "HOLD"]


def test_throughput_figure_is_returned_saved_labelled_and_marks_unranked_points(tmp_path):
    fig = plots.throughput_vs_concurrency(points(), tmp_path)
    assert isinstance(fig, Figure)
    assert (tmp_path / "throughput_vs_concurrency.png").stat().st_size > 5000
    ax = fig.axes[0]
    assert ax.get_xlabel() == "concurrency (closed loop)"
    assert ax.get_ylabel() == "output throughput (tokens / s)"
    marks = {c.get_label(): c.get_offsets().tolist() for c in ax.collections if c.get_label().startswith("not ranked")}
    assert marks == {"not ranked: HOLD": [[1.0, 20.0]], "not ranked: discarded": [[2.0, 12.0]]}
    assert not ax.texts  # reasons live in the legend, never over the data
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "a", "b [HOLD]", "not ranked: HOLD", "not ranked: discarded"]
    assert ax.get_ylim()[0] == 0  # throughput from zero
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2"]  # a count of clients: no tick at 1.5


def test_latency_figure_has_one_legend_entry_per_reason_and_a_log_axis_across_decades():
    ax = plots.latency_vs_load(points(), None, "e2e_ms").axes[0]
    assert ax.get_ylabel() == "E2E latency (ms)" and ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels.count("not ranked: HOLD") == 1 and labels.count("not ranked: discarded") == 1
    wide = points().assign(e2e_ms_p99=[150.0, 90000.0, 95.0])
    ax = plots.latency_vs_load(wide, None, "e2e_ms").axes[0]
    assert ax.get_yscale() == "log" and ax.get_ylabel() == "E2E latency (ms) (log scale)"


def test_alt_text_names_the_title_axes_and_series():
    fig = plots.throughput_vs_concurrency(points())
    assert plots.alt_text(fig) == ("Throughput vs load: output throughput (tokens / s) against concurrency (closed "
                                   "loop); series: a, b [HOLD], not ranked: HOLD, not ranked: discarded")


def test_column_titles_carry_units():
    assert column_title("ttft_ms_p50") == "TTFT p50 (ms)"
    assert column_title("e2e_ms_ci95") == "E2E ±95% CI (ms)"
    assert column_title("output_throughput_tok_s") == "output throughput (tok/s)"
    assert column_title("decode_tok_s_per_stream_mean") == "decode per stream mean (tok/s)"
    assert column_title("goodput_rps") == "goodput (req/s)"
    assert column_title("slo_attainment") == "SLO attainment (fraction)"
    assert column_title("weights GiB") == "weights GiB"


def test_numbers_rounded_to_what_they_support():
    assert [format_number(v) for v in (1234.567, 45.678, 3.14159, 0.012345, 4.0, 12, None, float("nan"), "x", True)] \
        == ["1,235", "45.7", "3.14", "0.0123", "4", "12", "–", "–", "x", "True"]


def test_readable_table_renders_html_and_aligned_text():
    t = readable(pd.DataFrame({"arm": ["a"], "ttft_ms_p50": [12.3456]}))
    html = t._repr_html_()
    assert "<table" in html and ">TTFT p50 (ms)</th>" in html and ">12.3</td>" in html
    assert ("#T_" in html and "_row0_col0 {\n  text-align: left;" in html
            and "_row0_col1 {\n  text-align: right;" in html)
    assert repr(t).splitlines() == ["arm TTFT p50 (ms)", "  a          12.3"]


def test_digests_and_structured_values_are_shortened_with_the_whole_on_hover():
    from stackbook.analysis.tables import short_cell

    digest = "7ef915c9bf9d94d8d70211970476878352a5b95855c589ae987916d7a455242b"
    assert short_cell(digest) == ("7ef915c9bf9d…", digest)
    text, full = short_cell({"kind": "fixed", "tokens": 128})
    assert text == "kind: fixed, tokens: 128" and full == '{"kind": "fixed", "tokens": 128}'
    text, _ = short_cell({f"k{i}": i for i in range(40)})
    assert len(text) == 60 and text.endswith("…")
    html = readable(pd.DataFrame({"arm": ["a"], "weights": [digest]}))._repr_html_()
    assert f'<span title="{digest}">7ef915c9bf9d…</span>' in html and f">{digest}<" not in html


def test_the_side_by_side_table_is_split_into_tables_keyed_by_arm_and_load():
    from stackbook.analysis.tables import side_by_side

    frame = pd.DataFrame([{"arm": "a", "load": 1, "label": "accepted", "completed": 8, "ttft_ms_p50": 12.345,
                           "e2e_ms_p99": 1000.0, "output_throughput_tok_s": 19.3, "goodput_rps": 0.6, "extra": 1}])
    tables = side_by_side(frame)
    assert [t.caption for t in tables] == ["Points: status and size", "Latency (ms)", "Throughput and SLO"]
    assert [list(t.frame.columns) for t in tables] == [
        ["arm", "load", "label", "completed"], ["arm", "load", "ttft_ms_p50", "e2e_ms_p99"],
        ["arm", "load", "output_throughput_tok_s", "goodput_rps", "extra"]]


def test_no_figure_draws_a_percentile_its_sample_cannot_carry():
    """32 to 64 requests a point carry a p95 (20 needed), not a p99 (100): the figures draw the p95
    and say why; 12 carry neither and the latency is drawn at p50; 100 carry the p99."""
    small = points().assign(completed=[32, 64, 32], e2e_ms_p95=[140.0, 800.0, 93.0])
    pareto = plots.pareto(small).axes[0]
    assert pareto.get_xlabel() == "p95 (n=32-64 a point: too few for a p99) end-to-end latency (ms)"
    assert list(pareto.get_lines()[0].get_xdata()) == [140.0, 800.0]  # arm a's p95, not its p99
    head = plots.headline(small).axes[0]
    assert head.get_ylabel() == "p95 (n=32-64 a point: too few for a p99) E2E (ms)"
    legend = [t.get_text() for t in plots.latency_vs_load(small, None, "e2e_ms").axes[0].get_legend().get_texts()]
    assert "a p95 (n=32-64 a point: too few for a p99)" in legend and not any("p99" == t[-3:] for t in legend)
    tiny = points().assign(completed=[12, 12, 12], e2e_ms_p95=[140.0, 800.0, 93.0])
    assert plots.headline(tiny).axes[0].get_ylabel() == "p50 (n=12 a point: too few for a p99) E2E (ms)"
    lines = plots.latency_vs_load(tiny, None, "e2e_ms").axes[0].get_lines()
    assert [list(line.get_ydata()) for line in lines if not line.get_label().startswith("_")][:1] == [[100.0, 300.0]]
    carried = points().assign(completed=[100, 200, 100])
    assert plots.pareto(carried).axes[0].get_xlabel() == "p99 end-to-end latency (ms)"
    assert plots.carried_tail(points().assign(completed=[40, 40, 40])) == (
        "e2e_ms_p50",
        "p50 (n=40 a point: too few for a p99)",
    )


def test_the_verdicts_figures_of_an_open_loop_run_are_drawn_against_its_offered_rate():
    """workloads is an open loop: its interval figures read "concurrency (closed loop)"."""
    from stackbook.analysis import interval_plots
    from stackbook.analysis.comparison import comparison_frame
    from stackbook.analysis.fairness import fairness_table
    from stackbook.analysis.run_data import load_run
    from stackbook.analysis.verdict import load_table

    campaign, arms = load_run("outputs/workloads/reference")
    table = load_table(comparison_frame(arms, fairness_table(campaign, arms)), 0.95)
    assert set(table["rate"]) == {0.5, 1.0, 2.0}
    ax = interval_plots.figure_vs_load(table, "output_throughput", 0.95).axes[0]
    assert ax.get_xlabel() == "offered rate (requests / s)"
    campaign, arms = load_run("outputs/quickstart/reference")
    closed = load_table(comparison_frame(arms, fairness_table(campaign, arms)), 0.95)
    assert interval_plots.figure_vs_load(closed, "output_throughput", 0.95).axes[0].get_xlabel() == \
        "concurrency (closed loop)"
