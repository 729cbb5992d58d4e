"""The verdict's per-load table: per arm and load, each compared figure with its interval and
sample size, on the repetitions the preregistered rules kept (the verdict reads the same ones),
and the table as a reader reads it."""
from __future__ import annotations

import pandas as pd
from scipy import stats

from stackbook.analysis.decision import (
    COMPARED,
    Compared,
    confidence_text,
    figure_intervals,
    interval,
    min_sample,
    supported,
)
from stackbook.evidence.label import Label

# Figures shown with an interval beside the compared ones (never ranked pairwise: a proportion
# bounded at 1 and a rate that may be 0 have no ratio to take).
SHOWN = (("goodput_rps", "goodput", "req/s"), ("slo_attainment", "SLO attainment", "share"))


def _cells(df: pd.DataFrame) -> dict[tuple[str, float], pd.DataFrame]:
    return {(arm, load): g.sort_values("repetition") if "repetition" in g else g
            for (arm, load), g in df.groupby(["arm", "load"], sort=False)}


def per_repetition_requests(g: pd.DataFrame) -> list[int]:
    return [int(x) for x in g["completed"].fillna(0)]


def _slo_interval(g: pd.DataFrame, confidence: float) -> tuple[float | None, float | None, float | None]:
    """SLO attainment with the wider of two intervals: the t-interval over repetitions and the
    Wilson interval of the pooled requests (several repetitions that all happen to read 1.0 still
    carry the binomial uncertainty of their few requests)."""
    per_rep = interval(list(g["slo_attainment"].dropna()), int(g["requests"].sum()), confidence)
    n = int(g["requests"].fillna(0).sum())
    if per_rep.estimate is None or n == 0:
        return None, None, None
    good = int(round((g["slo_attainment"] * g["requests"]).sum()))
    wilson = stats.binomtest(good, n).proportion_ci(confidence_level=confidence, method="wilson")
    lo = min(wilson.low, per_rep.lo) if per_rep.lo is not None else wilson.low
    hi = max(wilson.high, per_rep.hi) if per_rep.hi is not None else wilson.high
    return per_rep.estimate, max(0.0, lo), min(1.0, hi)


def load_table(df: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """One row per arm and load: repetitions, requests, and each figure's estimate with its
    interval (`<figure>`, `<figure>_lo`, `<figure>_hi`). A load is ranked on the repetitions the
    rules kept, as the verdict reads it; the ones left out are named in `left_out`, never averaged
    in. Where none was kept, every repetition is shown and `status` says why none is ranked. A
    compared figure is the geometric mean of its repetitions with a multiplicative interval whose
    spread is the arm's, pooled over its ranked loads (see analysis.decision)."""
    cells, left_out = {}, {}
    for key, g in _cells(df).items():
        kept = g[g["status"] == Label.ACCEPTED.value]
        cells[key] = kept if len(kept) else g
        if len(kept) and len(kept) < len(g):
            dropped = g[g["status"] != Label.ACCEPTED.value]
            left_out[key] = "; ".join(f"repetition {int(r['repetition']) if 'repetition' in r else '?'}: {r['status']}"
                                      for _, r in dropped.iterrows())
    ranked_keys = {k for k, g in cells.items() if (g["status"] == Label.ACCEPTED.value).all()}
    pooled = {}
    for arm in dict.fromkeys(a for a, _ in cells):
        mine = {k: g for k, g in cells.items() if k[0] == arm}
        for c in COMPARED:
            if c.column not in df:
                continue
            values = {k: list(g[c.column].dropna()) for k, g in mine.items()}
            spread_from = {k: v for k, v in values.items() if k in ranked_keys} or values
            ranked_iv = figure_intervals(spread_from, confidence)
            rest = {k: v for k, v in values.items() if k not in spread_from}
            pooled[(arm, c.name)] = ranked_iv | _with_spread_of(rest, spread_from, confidence)
    rows = []
    for (arm, load), g in cells.items():
        n = per_repetition_requests(g)
        row = {"arm": arm, "label": g["label"].iloc[0], "load": load, "repetitions": len(g),
               "rate": g["rate"].iloc[0] if "rate" in g else None,  # an open loop's: its figures' axis says so
               "scheduled_rate_rps": g["scheduled_rate_rps"].mean() if "scheduled_rate_rps" in g else None,
               "requests": sum(n), "requests_per_repetition": min(n) if n else 0,
               "status": ("accepted" if (arm, load) in ranked_keys else
                          "; ".join(sorted({s for s in g["status"] if s != Label.ACCEPTED.value}))),
               "left_out": left_out.get((arm, load), "")}
        for c in COMPARED:
            est, lo, hi = pooled.get((arm, c.name), {}).get((arm, load), (None, None, None))
            row |= {c.name: est, f"{c.name}_lo": lo, f"{c.name}_hi": hi,
                    f"{c.name}_supported": all(supported(c.percentile, k) for k in n)}
        row["slo_met"] = int(round((g["slo_attainment"] * g["requests"]).sum())) if g["slo_attainment"].notna().all() \
            else None
        if "queue_grew" in g:  # runs measured before the steady-state check have no such column
            row["queue_grew"] = bool(g["queue_grew"].eq(True).any())
        for column, name, _ in SHOWN:
            if name == "SLO attainment":
                est, lo, hi = _slo_interval(g, confidence)
            else:
                iv = interval(list(g[column].dropna()) if column in g else [], sum(n), confidence)
                est, lo, hi = iv.estimate, (max(0.0, iv.lo) if iv.lo is not None else None), iv.hi
            row |= {column: est, f"{column}_lo": lo, f"{column}_hi": hi}
        rows.append(row)
    return pd.DataFrame(rows)


def _with_spread_of(cells: dict, spread_from: dict, confidence: float) -> dict:
    """Intervals for cells left out of the ranking, using the spread of the ranked ones."""
    out = {}
    for k, v in cells.items():
        both = figure_intervals({**spread_from, k: v}, confidence)
        out[k] = both[k]
    return out


def figure_text(row: pd.Series, c: Compared) -> str:
    """A compared figure in a table cell: the estimate and its interval; an unsupported percentile
    (a mean of repetitions' interpolated tails, not a maximum) says so, with its sample size."""
    est = row.get(c.name)
    if est is None or pd.isna(est):
        return "-"
    if c.percentile and not row.get(f"{c.name}_supported"):
        n, need = int(row["requests_per_repetition"]), min_sample(c.percentile)
        return f"n={n} < {need} a repetition: p{c.percentile} {est:,.0f} interpolated, not compared"
    lo, hi = row.get(f"{c.name}_lo"), row.get(f"{c.name}_hi")
    digits = 1 if c.unit == "tok/s" or est < 100 else 0
    if lo is None or pd.isna(lo):
        return f"{est:,.{digits}f} (no interval)"
    return f"{est:,.{digits}f} [{lo:,.{digits}f}, {hi:,.{digits}f}]"


def display_table(table: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """The load table as a reader reads it: one column per figure, `estimate [interval]`."""
    if table.empty:
        return table
    out = table[["arm", "load", "status", "repetitions", "requests"]].copy()
    if "left_out" in table:  # a load ranked on the repetitions kept: the ones left out, by name
        out["status"] = [f"{s} (left out: {lo})" if lo else s for s, lo in zip(table["status"], table["left_out"])]
    ci = confidence_text(confidence)
    for c in COMPARED:
        head = c.label if not c.percentile else f"{c.label} (needs n ≥ {min_sample(c.percentile)} per repetition)"
        out[f"{head} {c.unit} [{ci} CI]"] = [figure_text(r, c) for _, r in table.iterrows()]
    for column, name, unit in SHOWN:
        out[f"{name} {unit} [{ci} CI]"] = [
            "-" if pd.isna(r[column]) else (f"{r[column]:.3f}" + ("" if pd.isna(r[f"{column}_lo"]) else
                                                                 f" [{r[f'{column}_lo']:.3f}, "
                                                                 f"{r[f'{column}_hi']:.3f}]"))
            for _, r in table.iterrows()]
    return out.sort_values(["load", "arm"]).reset_index(drop=True)
