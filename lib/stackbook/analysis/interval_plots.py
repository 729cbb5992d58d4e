"""Figures of the verdict's own numbers: per arm and load, each compared figure's estimate with its
interval (error bars), from the same load table the verdict reads, so a figure never disagrees
with the table beside it. Points left out of the ranking are drawn hollow and named in a
footnote, never as text on the plot."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.ticker import MaxNLocator

from stackbook.analysis.decision import COMPARED_BY_NAME, confidence_text
from stackbook.analysis.figure_scale import WEAK_LABEL, decided_top, mark_off_scale
from stackbook.analysis.plots import _figure, _save, load_axis
from stackbook.analysis.verdict import tail_figure


def _bars(table: pd.DataFrame, name: str):
    est = table[name].astype(float)
    lo = table[f"{name}_lo"].astype(float)
    hi = table[f"{name}_hi"].astype(float)
    return est, [(est - lo).fillna(0).clip(lower=0), (hi - est).fillna(0).clip(lower=0)]


def _footnote(fig, table: pd.DataFrame) -> None:
    left = table[table["status"] != "accepted"]
    partial = table[table["left_out"].fillna("") != ""] if "left_out" in table else table.iloc[:0]
    if left.empty and partial.empty:
        return
    text = "; ".join(
        (["hollow: not ranked: " + "; ".join(f"{r['arm']} at {r['load']:g} ({r['status']})"
                                             for _, r in left.iterrows())]
         if not left.empty else []) +
        [f"{r['arm']} at {r['load']:g} ranked on the repetitions kept (left out: {r['left_out']})"
         for _, r in partial.iterrows()])
    fig.text(0.01, -0.02, text[:300], fontsize=7, ha="left", va="top", wrap=True)


def _load_ticks(ax, table: pd.DataFrame) -> None:
    if "concurrency" in load_axis(table):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def weak_loads(decisions, name: str) -> set:
    """The loads where a decision on this figure rests on fewer than two degrees of freedom."""
    return {d["load"] for d in decisions or [] if d.get("metric") == name
            and d.get("decision") != "undecided" and (d.get("degrees_of_freedom") or 0) < 2}


def _weak_points(table: pd.DataFrame, weak: set, decisions) -> pd.Series:
    """Per row: its interval is weak (its load's decision is, or, with no decisions given, fewer
    than three repetitions: one degree of freedom or none)."""
    if decisions is not None:
        return table["load"].isin(weak)
    return table["repetitions"].astype(float) < 3


def figure_vs_load(table: pd.DataFrame, name: str, confidence: float, out_dir: Path | None = None,
                   decisions: list[dict] | None = None):
    """One compared figure against load, one line per arm with its interval at every load; a load
    whose decision rests on fewer than two degrees of freedom is shaded and named weak, and the
    axis is clipped to the decided points with the weak intervals it cuts marked at its edge."""
    if table.empty or name not in table:
        return None
    c = COMPARED_BY_NAME[name]
    fig, ax = _figure()
    weak = weak_loads(decisions, name)
    weak_rows = _weak_points(table, weak, decisions)
    top = decided_top(table[name], table.loc[~weak_rows, f"{name}_hi"], table.loc[weak_rows, f"{name}_hi"])
    cut = 0
    for arm, g in table.groupby("arm", sort=False):
        g = g.sort_values("load")
        est, err = _bars(g, name)
        line = ax.errorbar(g["load"], est, yerr=err, fmt="-o", capsize=3, label=arm)
        hollow = g["status"] != "accepted"
        if hollow.any():
            ax.scatter(g.loc[hollow, "load"], est[hollow], s=80, facecolors="white",
                       edgecolors=line.lines[0].get_color(), zorder=5)
        if top is not None:
            cut += mark_off_scale(ax, g["load"], g[f"{name}_hi"].astype(float), top, line.lines[0].get_color(),
                                  label=cut == 0)
    loads = table["load"].astype(float)
    half = 0.06 * ((loads.max() - loads.min()) or loads.max() or 1)
    for i, load in enumerate(sorted(weak)):
        ax.axvspan(load - half, load + half, color="0.85", zorder=0, label=WEAK_LABEL if i == 0 else "_nolegend_")
    ax.set_ylim(bottom=0, top=top)
    _load_ticks(ax, table)
    reps = f"{int(table['repetitions'].min())}" + (f" to {int(table['repetitions'].max())}"
                                                    if table["repetitions"].nunique() > 1 else "")
    ax.set_title(f"{c.label} against load: mean of {reps} repetitions, {confidence_text(confidence)} interval")
    ax.set_xlabel(load_axis(table))
    ax.set_ylabel(f"{c.label} ({c.unit}); axis from zero" + ("; clipped to the decided points" if top else ""))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    _footnote(fig, table)
    return _save(fig, out_dir, f"{name}_vs_load")


def pareto_with_intervals(table: pd.DataFrame, confidence: float, out_dir: Path | None = None):
    """Throughput against latency per arm and load, both with their intervals; a point is beaten
    only where another's bars clear it on both axes."""
    if table.empty:
        return None
    lat = tail_figure(table[table["status"] == "accepted"] if (table["status"] == "accepted").any() else table)
    fig, ax = _figure()
    for arm, g in table.groupby("arm", sort=False):
        g = g.sort_values("load")
        x, xerr = _bars(g, lat.name)
        y, yerr = _bars(g, "output_throughput")
        line = ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="-o", capsize=3, label=arm)
        for (_, r), xi, yi in zip(g.iterrows(), x, y):
            ax.annotate(f"{r['load']:g}", (xi, yi), fontsize=7, xytext=(4, 4), textcoords="offset points",
                        color=line.lines[0].get_color())
    span = table[lat.name].max() / max(1e-9, table[lat.name].min())
    if span > 10:
        ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_title(f"Throughput against {lat.label} (points labelled by load; {confidence_text(confidence)} intervals)")
    ax.set_xlabel(f"{lat.label} ({lat.unit})" + ("; log axis" if span > 10 else ""))
    ax.set_ylabel("output throughput (tok/s); axis from zero")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    _footnote(fig, table)
    return _save(fig, out_dir, "pareto_intervals")
