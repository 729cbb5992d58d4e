"""Figures a reader would rather look at than read: latency, throughput and their distributions
against load. Each is drawn on its own Figure, saved as PNG under figures/ and returned: the
notebook displays it inline and report.html embeds it (stackbook.analysis.figure_style)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import seaborn as sns

from stackbook.analysis.figure_scale import series_colours
from stackbook.analysis.figure_style import (  # noqa: F401 - point_status and alt_text are part of this module's use
    _figure,
    _finish,
    _label,
    _mark_unranked,
    _per_arm,
    _save,
    alt_text,
    carried_tail,
    load_ticks,
    load_axis,
    point_status,
    scale_axis,
)
from stackbook.analysis.queueing_plots import (  # noqa: F401 - the notebooks call every figure through plots
    demand_bars, kingman_curves, measured_demand_bars, mva_centres_check, predicted_vs_measured,
    waits_vs_arrival_variance)
from stackbook.analysis.timeline_plots import (  # noqa: F401
    engine_resources_over_time,
    request_timeline,
    throughput_over_time,
)


def latency_vs_load(df: pd.DataFrame, out_dir: Path | None = None, metric: str = "e2e_ms"):
    """p50 (solid) and the highest tail its samples carry (dashed) of one latency against load, one
    colour per arm; with too few requests a point for a p95, p50 alone."""
    if df.empty or f"{metric}_p50" not in df:
        return None
    fig, ax = _figure()
    column, tail = carried_tail(df, metric)
    for name, g in _per_arm(df):
        line, = ax.plot(g["load"], g[f"{metric}_p50"], "-o", label=f"{name} p50")
        if column != f"{metric}_p50":
            ax.plot(g["load"], g[column], "--s", color=line.get_color(), label=f"{name} {tail}")
    _mark_unranked(ax, df, "load", f"{metric}_p50")
    _mark_unranked(ax, df, "load", column, legend=False)
    load_ticks(ax, df)
    if column == f"{metric}_p50":
        ax.set_title(tail)
    scale = scale_axis(ax, pd.concat([df[f"{metric}_p50"], df[column]]))
    short = metric.replace("_ms", "").upper()
    return _finish(fig, ax, out_dir, f"{metric}_vs_load", f"{short} percentiles vs load", load_axis(df),
                   f"{short} latency (ms){scale}")


def throughput_vs_concurrency(df: pd.DataFrame, out_dir: Path | None = None):
    if df.empty:
        return None
    fig, ax = _figure()
    for name, g in _per_arm(df):
        ax.plot(g["load"], g["output_throughput_tok_s"], "-o", label=name)
    _mark_unranked(ax, df, "load", "output_throughput_tok_s")
    load_ticks(ax, df)
    ax.set_ylim(bottom=0)  # from zero: a gap of 1 tok/s between 12 and 13 is noise, and must look it
    return _finish(fig, ax, out_dir, "throughput_vs_concurrency", "Throughput vs load", load_axis(df),
                   "output throughput (tokens / s)")


def pareto(df: pd.DataFrame, out_dir: Path | None = None):
    """Throughput against tail latency: up and to the left is better; the legend names each
    point's load by its marker order along the line (lightest first)."""
    if df.empty:
        return None
    fig, ax = _figure()
    column, tail = carried_tail(df)
    for name, g in _per_arm(df):
        line, = ax.plot(g[column], g["output_throughput_tok_s"], "-o",
                        label=f"{name} (load {', '.join(f'{v:g}' for v in g['load'])})")
        first = g.iloc[0]
        ax.plot(first[column], first["output_throughput_tok_s"], "o", ms=11, mfc="none",
                color=line.get_color(), label="_nolegend_")
    _mark_unranked(ax, df, column, "output_throughput_tok_s")
    xscale = scale_axis(ax, df[column], "x")
    ax.set_ylim(bottom=0)
    return _finish(fig, ax, out_dir, "pareto", "Throughput vs latency (ringed: lightest load)",
                   f"{tail} end-to-end latency (ms){xscale}", "output throughput (tokens / s)")


def headline(df: pd.DataFrame, out_dir: Path | None = None):
    """The report's first figure: E2E at the highest percentile the samples carry (p99 with 100
    requests a point) and output throughput against load, side by side."""
    if df.empty:
        return None
    fig, (left, right) = _figure((11, 3.4), ncols=2)
    column, tail = carried_tail(df)
    for name, g in _per_arm(df):
        line, = left.plot(g["load"], g[column], "-o", label=name)
        right.plot(g["load"], g["output_throughput_tok_s"], "-o", color=line.get_color(), label=name)
    _mark_unranked(left, df, "load", column, legend=False)
    _mark_unranked(right, df, "load", "output_throughput_tok_s")
    for ax in (left, right):
        load_ticks(ax, df)
        ax.set_xlabel(load_axis(df))
        ax.grid(alpha=0.3)
    scale = scale_axis(left, df[column])
    right.set_ylim(bottom=0)
    left.set(title="Latency (lower is better)", ylabel=f"{tail} E2E (ms){scale}")
    right.set(title="Output throughput (higher is better)", ylabel="tokens / s")
    right.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    fig.tight_layout()
    return _save(fig, out_dir, "headline")


def _slo_line(ax, value: float | None, what: str) -> None:
    if value:
        ax.axvline(value, color="tab:red", ls=":", lw=1.5, label=f"SLO {what} {value:g} ms")


def _measured(df: pd.DataFrame) -> pd.DataFrame:
    return df[(df["phase"] == "measure") & df["ok"]]


def ttft_distribution(requests: dict[str, pd.DataFrame], out_dir: Path | None = None, slo=None):
    """One empirical CDF per arm and point (n requests in the legend), the SLO bound dotted."""
    if not requests:
        return None
    fig, ax = _figure()
    values = []
    series = [(arm, point, g) for arm, df in requests.items() for point, g in _measured(df).groupby("point")
              if g["ttft_ms"].notna().any()]
    for (arm, point, g), colour in zip(series, series_colours(len(series))):
        sns.ecdfplot(x=g["ttft_ms"], ax=ax, color=colour, label=f"{arm} {point} (n={g['ttft_ms'].notna().sum()})")
        values.append(g["ttft_ms"])
    _slo_line(ax, getattr(slo, "ttft_ms", None), "TTFT")
    scale = scale_axis(ax, pd.concat(values) if values else [], "x")
    return _finish(fig, ax, out_dir, "ttft_cdf", "TTFT distribution (empirical CDF)", f"TTFT (ms){scale}",
                   "fraction of requests")


def tpot_itl_distribution(requests: dict[str, pd.DataFrame], out_dir: Path | None = None, slo=None):
    """TPOT (one value per request) and chunk ITL (every gap between chunks) per arm and point,
    as empirical CDFs with n in the legend and the TPOT SLO bound dotted."""
    frames = {a: _measured(df) for a, df in requests.items() if not df.empty}
    frames = {a: df for a, df in frames.items() if not df.empty}
    if not frames:
        return None
    fig, (left, right) = _figure((11, 3.6), ncols=2)
    tpots, itls = [], []
    series = [(arm, point, g) for arm, df in frames.items() for point, g in df.groupby("point")]
    for (arm, point, g), colour in zip(series, series_colours(len(series))):  # one colour per series on both panels
        tpot = g["tpot_ms"].dropna()
        itl = pd.Series([x for xs in g["itl_ms"] for x in xs], dtype=float)
        if len(tpot):
            sns.ecdfplot(x=tpot, ax=left, color=colour, label=f"{arm} {point} (n={len(tpot)})")
            tpots.append(tpot)
        if len(itl):
            sns.ecdfplot(x=itl, ax=right, color=colour, label=f"{arm} {point} (n={len(itl)} gaps)")
            itls.append(itl)
    _slo_line(left, getattr(slo, "tpot_ms", None), "TPOT")
    lscale = scale_axis(left, pd.concat(tpots) if tpots else [], "x")
    rscale = scale_axis(right, pd.concat(itls) if itls else [], "x")
    left.set(title="TPOT per request (empirical CDF)", xlabel=f"TPOT (ms){lscale}", ylabel="fraction of requests")
    right.set(title="Chunk ITL, every gap (empirical CDF)", xlabel=f"ITL (ms){rscale}", ylabel="fraction of gaps")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, out_dir, "tpot_itl_cdf")


def length_histograms(m: pd.DataFrame, out_dir: Path | None = None):
    """Prompt and output lengths the engine reported, over the measured requests."""
    ok = m[m["ok"]]
    if ok.empty:
        return None
    fig, axes = _figure((9, 3.2), ncols=2)
    for ax, col, title in ((axes[0], "prompt_tokens", "prompt tokens (server)"),
                           (axes[1], "output_tokens", "output tokens (server)")):
        sns.histplot(x=ok[col].dropna(), bins=min(30, max(5, ok[col].nunique())), ax=ax)
        ax.set_title(title)
        ax.set_xlabel("tokens")
        ax.set_ylabel("requests")
    fig.tight_layout()
    return _save(fig, out_dir, "lengths")


def sizing_bars(frame: pd.DataFrame, out_dir: Path | None = None):
    """Live sequences per arm: the arithmetic against each engine's accounting of the same pool."""
    if frame.empty:
        return None
    cols = [c for c in ("live sequences (arithmetic)", "max concurrency (engine rule)",
                        "max concurrency (engine reported)") if frame[c].notna().any()]
    fig, ax = _figure()
    frame[cols].astype(float).plot.bar(ax=ax, rot=0)
    ax.set_xlabel("arm")
    ax.set_ylabel("sequences at the protocol's context")
    ax.set_title("How many sequences live at once")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    return _save(fig, out_dir, "sizing")
