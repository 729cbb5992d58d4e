"""The queueing table of the analysis: fitted and checked on ranked points only, per load on the
repetitions' pooled means, with the loads the fit never read held out (or a row saying none was)."""
import pandas as pd
import pytest

from stackbook.analysis.comparison import queueing_fits
from stackbook.analysis.queueing import ClosedLoopFit

TRUTH = ClosedLoopFit(queue_demand_s=0.25, delay_demand_s=1.0)


def row(arm, c, rep, *, label="accepted", discarded=False, scale=1.0):
    p = TRUTH.predict(c)
    return {"arm": arm, "label": label, "point": f"c{c}-r{rep}", "discarded": discarded, "concurrency": c,
            "e2e_ms_mean": 1000 * p["response_s"] * scale, "request_throughput_rps": p["throughput_rps"] / scale,
            "completed": 20, "window_s": 20 / (p["throughput_rps"] / scale)}


def frame():
    rows = [row("a", c, r) for c in (1, 2, 4) for r in (0, 1)]
    rows[3] = row("a", 2, 1, discarded=True, scale=3.0)          # c2-r1 discarded: three times slower
    rows += [row("b", c, r) for c in (1, 2) for r in (0, 1)]
    rows += [row("held", c, 0, label="held") for c in (1, 2, 4)]  # a label that keeps it out of the ranking
    rows += [row("other", c, 0) for c in (1, 2, 4)]                # not comparable, per the fairness table
    return pd.DataFrame(rows)


def test_only_ranked_points_enter_and_loads_not_fitted_are_held_out():
    fairness = pd.DataFrame({"comparable": [True, True, True, False]}, index=["a", "b", "held", "other"])
    curves, errors = queueing_fits(frame(), fairness)
    assert set(curves["arm"]) == {"a", "b"} and set(errors["arm"]) == {"a", "b"}
    a = errors[errors["arm"] == "a"].iloc[0]
    # c2 is held out (fitted on c1 and c4), on its one undiscarded repetition: the model's own law, no error
    assert a["concurrency"] == 2 and a["repetitions"] == 1
    assert a["held out"] == "fitted on concurrency 1 and 4; held out: 2"
    assert a["measured_response_s"] == pytest.approx(TRUTH.predict(2)["response_s"])
    assert abs(a["response_error_pct"]) < 5
    b = errors[errors["arm"] == "b"].iloc[0]
    assert b["held out"].startswith("no load held out: the fit used both loads tested (concurrency 1 and 2)")
    assert pd.isna(b.get("response_error_pct"))
    measured = curves[(curves["arm"] == "a") & (curves["concurrency"] == 2)]["measured_e2e_ms"].iloc[0]
    assert measured == pytest.approx(1000 * TRUTH.predict(2)["response_s"])   # the discarded c2-r1 never pooled in


def test_a_discarded_repetition_would_have_moved_the_held_out_load():
    df = frame()
    df["discarded"] = False                                                   # were c2-r1 kept, c2 would read slower
    _, errors = queueing_fits(df)
    a = errors[errors["arm"] == "a"].iloc[0]
    assert a["repetitions"] == 2
    assert a["measured_response_s"] == pytest.approx(2 * TRUTH.predict(2)["response_s"])  # (1 + 3) / 2
    assert set(errors["arm"]) == {"a", "b", "other"}                          # no fairness given: every accepted arm


def test_an_open_loop_run_has_no_closed_loop_model():
    df = pd.DataFrame([{"arm": "a", "label": "accepted", "point": "rate1-r0", "discarded": False, "concurrency": None,
                        "rate": 1.0, "e2e_ms_mean": 500.0, "request_throughput_rps": 1.0}])
    curves, errors = queueing_fits(df)
    assert curves.empty and errors.empty
