"""The interactivity frontier's numbers come from the verdict's load table: tokens/s per user is
1000 / TPOT p50 with the TPOT interval inverted, throughput per device is divided by the host's
count, and a point is dominated only where another ranked point's intervals clear it on both axes."""
import pandas as pd
import pytest
from stackbook.analysis.interactivity import PER_USER, Devices, host_devices, interactivity_figure, interactivity_table


def table():
    def row(arm, load, tpot, lo, hi, tput, tlo, thi, status="accepted"):
        return {"arm": arm, "load": load, "status": status, "tpot_p50": tpot, "tpot_p50_lo": lo, "tpot_p50_hi": hi,
                "output_throughput": tput, "output_throughput_lo": tlo, "output_throughput_hi": thi}
    return pd.DataFrame([row("a", 1, 20.0, 19.0, 21.0, 40.0, 39.0, 41.0),
                         row("b", 1, 10.0, 9.0, 11.0, 80.0, 78.0, 82.0),     # faster for the user and the host
                         row("c", 1, 21.0, 8.0, 30.0, 41.0, 30.0, 90.0),     # intervals too wide to be beaten
                         row("d", 1, 5.0, 4.9, 5.1, 900.0, 890.0, 910.0, status="HOLD")])


def test_axes_are_the_load_tables_figures_per_user_and_per_device():
    out = interactivity_table(table(), Devices(2, "logical CPU")).set_index("arm")
    assert out.loc["a", PER_USER] == pytest.approx(50.0)
    assert (out.loc["a", f"{PER_USER} lo"], out.loc["a", f"{PER_USER} hi"]) == pytest.approx((1000 / 21, 1000 / 19))
    assert out.loc["b", "output tokens/s per logical CPU"] == 40.0
    assert out.loc["b", "output tokens/s per logical CPU hi"] == 41.0


def test_only_a_ranked_point_whose_intervals_clear_another_dominates_it():
    out = interactivity_table(table(), Devices(2, "logical CPU")).set_index("arm")
    assert out.loc["a", "dominated by"] == "b at 1"
    assert out.loc["c", "dominated by"] == ""      # its intervals overlap b's
    assert out.loc["b", "dominated by"] == ""      # d is faster but on HOLD: never ranked


def test_an_aa_pair_never_dominates_itself():
    t = table()
    replica = t[t["arm"] == "a"].assign(arm="a-again")
    out = interactivity_table(pd.concat([t[t["arm"] == "a"], replica]), Devices(1, "logical CPU"))
    assert (out["dominated by"] == "").all()


def test_the_host_count_is_read_from_the_manifest_and_the_figure_says_it(tmp_path):
    devices = host_devices({"harness_ceiling": {"host": {"cpu": "AMD EPYC", "logical_cpus": 2}}})
    assert devices == Devices(2, "logical CPU")
    fig = interactivity_figure(table(), devices, 0.95, tmp_path)
    assert (tmp_path / "interactivity.png").stat().st_size > 0
    ax = fig.axes[0]
    assert "per logical CPU (2 on this host)" in ax.get_title()
    assert ax.get_xlabel() == "output tokens/s per logical CPU (output throughput / 2)"
