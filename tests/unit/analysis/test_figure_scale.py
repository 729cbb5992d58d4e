"""Figures past 8 series keep one colour per series; an axis is clipped to the decided points with
the weak intervals it cuts marked; a load decided on fewer than two degrees of freedom is shaded."""
import pandas as pd
from matplotlib.colors import to_hex
from stackbook.analysis import interval_plots, plots
from stackbook.analysis.figure_scale import (
    OFF_SCALE_LABEL,
    WEAK_LABEL,
    decided_top,
    series_colours,
)
from stackbook.analysis.interactivity import Devices, interactivity_figure


def test_twelve_series_get_twelve_distinct_colours():
    assert len({to_hex(c) for c in series_colours(12)}) == 12
    assert len({to_hex(c) for c in series_colours(8)}) == 8
    assert series_colours(0) == []


def test_the_top_covers_the_decided_points_and_cuts_only_a_weak_interval():
    assert decided_top([10, 20], [25], [578]) == 25 * 1.15
    assert decided_top([10, 20], [25], [26]) is None  # the weak interval fits under the head room
    assert decided_top([10, 20], [], [float("nan")]) is None
    assert decided_top([], [], [578]) is None


def _table(reps_at_4: int) -> pd.DataFrame:
    rows = []
    for arm, base in (("a", 10.0), ("b", 20.0)):
        for load in (1, 2, 4):
            hi = 578.0 if (arm, load) == ("a", 4) else base * load * 1.1
            rows.append({"arm": arm, "load": load, "status": "accepted", "left_out": "",
                         "repetitions": reps_at_4 if load == 4 else 3, "output_throughput": base * load,
                         "output_throughput_lo": base * load * 0.9, "output_throughput_hi": hi,
                         "tpot_p50": 1000 / (base * load), "tpot_p50_lo": 1000 / hi,
                         "tpot_p50_hi": 1000 / (base * load * 0.9)})
    return pd.DataFrame(rows)


def _labels(ax):
    return ax.get_legend_handles_labels()[1]


def test_the_decision_figure_shades_the_weak_load_and_clips_its_interval():
    decisions = [{"metric": "output_throughput", "load": 4, "decision": "ahead", "degrees_of_freedom": 1},
                 {"metric": "output_throughput", "load": 2, "decision": "ahead", "degrees_of_freedom": 4}]
    fig = interval_plots.figure_vs_load(_table(2), "output_throughput", 0.95, None, decisions)
    ax = fig.axes[0]
    assert ax.get_ylim() == (0, 80 * 1.15)  # the highest estimate (b at 4); load 4 is weak, its intervals may be cut
    assert WEAK_LABEL in _labels(ax) and OFF_SCALE_LABEL in _labels(ax)
    assert any(t.get_text() == "to 578" for t in ax.texts)
    assert "clipped" in ax.get_ylabel()


def test_a_figure_whose_decisions_all_rest_on_two_df_is_not_clipped():
    decisions = [{"metric": "output_throughput", "load": 4, "decision": "ahead", "degrees_of_freedom": 2}]
    ax = interval_plots.figure_vs_load(_table(3), "output_throughput", 0.95, None, decisions).axes[0]
    assert ax.get_ylim()[1] > 578
    assert WEAK_LABEL not in _labels(ax) and OFF_SCALE_LABEL not in _labels(ax)


def test_the_interactivity_axis_is_not_stretched_by_a_one_df_interval():
    ax = interactivity_figure(_table(2), Devices(2, "logical CPU"), 0.95).axes[0]
    assert ax.get_ylim()[1] < 578
    assert OFF_SCALE_LABEL in _labels(ax)


def test_twelve_cdfs_are_drawn_in_twelve_colours():
    requests = {f"arm{i}": pd.DataFrame({"phase": "measure", "ok": True, "point": "c1-r0",
                                         "ttft_ms": [100.0 + i, 120.0 + i, 150.0 + i]}) for i in range(12)}
    ax = plots.ttft_distribution(requests).axes[0]
    assert len({to_hex(line.get_color()) for line in ax.get_lines() if not line.get_label().startswith("_")}) == 12
