"""The tail of each arm's latency at each load, from its requests themselves, and the pairs whose
tails are ordered.

The verdict compares a percentile over repetitions only where every repetition can estimate it
(a p99 needs 100 requests each): a tail then rests on a t interval of interpolated values. The
requests of a load pooled over its ranked repetitions carry more: an order-statistic interval of
the quantile, exact for any continuous distribution and honest about its sample (a side the
requests cannot bound is unbounded, with the count that would bound it). Two arms' tails are
ordered at a load where one's interval lies wholly below the other's; overlapping intervals are
not ordered. Pooling assumes the repetitions draw from one distribution: the spread between
rounds the verdict measures is not in these intervals.
"""
from __future__ import annotations

from itertools import combinations

import pandas as pd

from stackbook.analysis.decision import confidence_text
from stackbook.measure.slo_bounds import quantile_interval

TAIL_QUANTILES = (0.9, 0.99)
FIGURE, UNIT = "e2e_ms", "ms"


def _q(q: float) -> str:
    return f"p{q * 100:g}"


def tail_rows(requests: dict[str, pd.DataFrame], ranked: pd.DataFrame, confidence: float) -> list[dict]:
    """Per arm, load and tail quantile: the pooled measured requests' quantile and its
    order-statistic interval. `requests`: each arm's per-request frame (point, phase, ok, e2e_ms);
    `ranked`: the points the verdict ranks (arm, load, point)."""
    rows = []
    if ranked.empty or not {"arm", "load", "point"} <= set(ranked.columns):
        return rows
    for (arm, load), g in ranked.groupby(["arm", "load"], sort=True):
        frame = requests.get(arm)
        if frame is None or frame.empty:
            continue
        mine = frame[frame["point"].isin(set(g["point"])) & (frame["phase"] == "measure")]
        values = sorted(float(v) for v in mine.loc[mine["ok"].astype(bool), FIGURE].dropna())
        for q in TAIL_QUANTILES:
            iv = quantile_interval(values, q, confidence) if values else None
            rows.append({"arm": arm, "load": load, "quantile": _q(q), "requests": len(mine),
                         "completed": len(values), "repetitions": int(g["point"].nunique()),
                         "estimate": float(pd.Series(values).quantile(q)) if values else None,
                         "lo": iv.lower if iv else None, "hi": iv.upper if iv else None,
                         "coverage": round(iv.coverage, 4) if iv else None,
                         "unbounded": iv.unbounded if iv else "no completed requests"})
    return rows


def tail_lines(rows: list[dict], confidence: float) -> list[str]:
    """Per load and quantile, each pair of arms ordered by their tails' intervals, or why not."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["load"], r["quantile"]), []).append(r)
    lines = []
    for (load, q), g in sorted(groups.items()):
        said = [_pair_words(a, b) for a, b in combinations(g, 2)]
        if len(g) > 1 and all(r["hi"] is None for r in g):
            counts = sorted(r["completed"] for r in g)
            need = g[0]["unbounded"].rsplit("at least ", 1)[-1] if g[0]["unbounded"] else "more"
            said = [f"not ordered: no arm's requests bound it from above (at least {need}; "
                    f"{counts[0]} to {counts[-1]} here)" if counts[0] != counts[-1] else
                    f"not ordered: no arm's requests bound it from above (at least {need}; {counts[0]} here)"]
        if said:
            lines.append(f"At load {load:g}, E2E {q} from the pooled requests ({confidence_text(confidence)} "
                         "order-statistic intervals): " + "; ".join(said) + ".")
    return lines


def _pair_words(a: dict, b: dict) -> str:
    for lo_side, hi_side in ((a, b), (b, a)):
        if lo_side["hi"] is not None and hi_side["lo"] is not None and lo_side["hi"] < hi_side["lo"]:
            return (f"{lo_side['arm']}'s tail is lower ({_iv(lo_side)} against {hi_side['arm']}'s {_iv(hi_side)})")
    short = [r for r in (a, b) if r["unbounded"]]
    if short and any(r["hi"] is None or r["lo"] is None for r in short):
        return (f"{a['arm']} and {b['arm']} not ordered: " + "; ".join(f"{r['arm']} {r['unbounded']}" for r in short))
    return f"{a['arm']} {_iv(a)} and {b['arm']} {_iv(b)} overlap: not ordered"


def _iv(r: dict) -> str:
    lo = "-" if r["lo"] is None else f"{r['lo']:,.0f}"
    hi = "unbounded" if r["hi"] is None else f"{r['hi']:,.0f}"
    return f"[{lo}, {hi}] {UNIT} on {r['completed']}"
