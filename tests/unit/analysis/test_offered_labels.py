"""Loads read at what was offered: an open loop's rate labelled, on an axis and in the SLO table,
with the rate its seeded schedules sent wherever one strayed beyond the tolerance."""
import pandas as pd
from matplotlib.figure import Figure

from stackbook.analysis.figure_style import load_ticks
from stackbook.analysis.verdict import sent_column
from stackbook.measure.validity import SCHEDULE_STRAY, sent_label

# known-effect's seeded schedules (the committed run before it was regenerated)
POINTS = pd.DataFrame({"arm": ["fast"] * 4, "rate": [0.4, 0.4, 0.8, 0.8], "load": [0.4, 0.4, 0.8, 0.8],
                       "scheduled_rate_rps": [0.3512, 0.3512, 0.7025, 0.7025]})


def test_a_rate_is_labelled_with_what_was_sent_only_where_it_strayed():
    assert SCHEDULE_STRAY == 0.1
    assert sent_label(0.4, [0.3512, 0.3512]) == "0.4 (sent 0.351)"
    assert sent_label(0.8, [0.70, 0.95]) == "0.8 (sent 0.7-0.95)"
    assert sent_label(0.8, [0.79, 0.83]) == "0.8"  # within 10%: the rate named is the rate offered
    assert sent_label(0.8, []) == "0.8"


def test_the_axis_ticks_sit_at_the_rates_named_and_read_as_sent():
    ax = Figure().add_subplot()
    ax.plot(POINTS["load"], [1, 2, 3, 4])
    load_ticks(ax, POINTS)
    assert list(ax.get_xticks()) == [0.4, 0.8]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.4 (sent 0.351)", "0.8 (sent 0.703)"]
    closed = pd.DataFrame({"load": [1, 2, 4]})
    ax2 = Figure().add_subplot()
    load_ticks(ax2, closed)
    assert [t.get_text() for t in ax2.get_xticklabels()] == ["1", "2", "4"]


def test_the_slo_table_names_the_rates_sent_for_an_open_loop_only():
    assert sent_column(POINTS) == {"rates as sent (req/s)": "0.4 (sent 0.351), 0.8 (sent 0.703)"}
    assert sent_column(POINTS.assign(scheduled_rate_rps=[0.41, 0.41, 0.79, 0.79])) == {}
    assert sent_column(pd.DataFrame({"load": [1, 2], "rate": [None, None]})) == {}
