"""Tails from the pooled requests: each arm's quantile with its order-statistic interval, and two
arms' tails ordered only where their intervals do not overlap."""
import numpy as np
import pandas as pd

from stackbook.analysis.tails import tail_lines, tail_rows
from stackbook.measure.slo_bounds import quantile_interval


def _frame(values, point="c1-r0"):
    return pd.DataFrame({"point": point, "phase": "measure", "ok": True, "e2e_ms": values})


def _ranked(*arms):
    return pd.DataFrame([{"arm": a, "load": 1, "point": "c1-r0"} for a in arms])


def test_each_tail_is_the_order_statistic_interval_of_the_pooled_requests():
    rng = np.random.default_rng(0)
    fast = rng.lognormal(np.log(500), 0.1, 200)
    rows = tail_rows({"fast": _frame(fast)}, _ranked("fast"), 0.95)
    p90 = next(r for r in rows if r["quantile"] == "p90")
    iv = quantile_interval(sorted(fast), 0.9, 0.95)
    assert (p90["lo"], p90["hi"], p90["completed"]) == (iv.lower, iv.upper, 200)
    assert p90["lo"] < np.quantile(fast, 0.9) < p90["hi"]
    p99 = next(r for r in rows if r["quantile"] == "p99")
    assert p99["hi"] is None and "at least 368 needed" in p99["unbounded"]


def test_tails_apart_are_ordered_and_overlapping_tails_are_not():
    rng = np.random.default_rng(1)
    frames = {"fast": _frame(rng.lognormal(np.log(500), 0.1, 200)),
              "slow": _frame(rng.lognormal(np.log(900), 0.1, 200)),
              "fast-again": _frame(rng.lognormal(np.log(500), 0.1, 200))}
    rows = tail_rows(frames, _ranked("fast", "slow", "fast-again"), 0.95)
    line = next(x for x in tail_lines(rows, 0.95) if "p90" in x)
    assert "fast's tail is lower" in line and "fast-again's tail is lower" in line
    assert "fast [" in line and "overlap: not ordered" in line
    p99 = next(x for x in tail_lines(rows, 0.95) if "p99" in x)
    assert p99.endswith("not ordered: no arm's requests bound it from above (at least 368 needed; 200 here).")


def test_only_ranked_points_and_measured_answered_requests_count():
    frame = pd.concat([_frame([100.0] * 50), _frame([9e9] * 5, point="c1-r1"),
                       _frame([9e9] * 5).assign(phase="warmup"), _frame([9e9] * 5).assign(ok=False)])
    rows = tail_rows({"a": frame}, _ranked("a"), 0.95)
    assert {r["completed"] for r in rows} == {50} and {r["requests"] for r in rows} == {55}
    assert next(r for r in rows if r["quantile"] == "p90")["hi"] == 100.0
