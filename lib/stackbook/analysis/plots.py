"""Figures a reader would rather look at than read. Each is drawn on its own matplotlib Figure
(no pyplot state, so nothing is shown twice or leaks between cells), saved as PNG under figures/
and returned: the notebook displays it inline and report.html embeds it."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

STYLE = "whitegrid"
UNRANKED_MARKER = dict(marker="X", s=90, color="black", zorder=6)


def _register_inline_png() -> None:
    """In an IPython kernel, a Figure displays as PNG whatever the matplotlib backend is (the
    runner's kernels may run with MPLBACKEND=Agg, which would otherwise show only its repr)."""
    try:
        from IPython import get_ipython
        from IPython.core.pylabtools import print_figure
    except ImportError:
        return
    ip = get_ipython()
    if ip is not None:
        ip.display_formatter.formatters["image/png"].for_type(
            Figure, lambda fig: print_figure(fig, "png", bbox_inches="tight", dpi=96))


_register_inline_png()


def _figure(figsize=(6.5, 4), ncols: int = 1):
    with sns.axes_style(STYLE):
        fig = Figure(figsize=figsize)
        axes = fig.subplots(1, ncols)
    return fig, axes


def _save(fig, out_dir: Path | None, name: str):
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        fig.savefig(out_dir / f"{name}.png", dpi=110, bbox_inches="tight")
    return fig


def _label(arm: str, label: str) -> str:
    return arm if label == "accepted" else f"{arm} [{label}]"


def point_status(df: pd.DataFrame) -> pd.Series:
    """Per point: "accepted", or why it is not ranked: the frame's own `status` column when it
    has one, else "discarded" for a discarded point, else the arm's label (HOLD, not comparable...)."""
    status = pd.Series("accepted", index=df.index, dtype=object)
    if "label" in df:
        status = df["label"].fillna("accepted").astype(str).where(lambda s: s != "", "accepted")
    if "discarded" in df:
        status = status.mask(df["discarded"].fillna(False).astype(bool), "discarded")
    if "status" in df:
        status = df["status"].where(df["status"].notna(), status).astype(str)
    return status


def _mark_unranked(ax, df: pd.DataFrame, x: str, y: str, legend: bool = True) -> None:
    """A black cross on every point that is not ranked, annotated with the reason."""
    status = point_status(df)
    bad = df[status != "accepted"].dropna(subset=[x, y])
    if bad.empty:
        return
    ax.scatter(bad[x], bad[y], label="not ranked (HOLD, discarded, ...)" if legend else "_nolegend_",
               **UNRANKED_MARKER)
    for i, r in bad.iterrows():
        ax.annotate(status[i], (r[x], r[y]), fontsize=7, xytext=(4, -10), textcoords="offset points")


def load_axis(df: pd.DataFrame) -> str:
    """Closed-loop sweeps are plotted against concurrency, open-loop ones against offered rate."""
    if "rate" in df and df["rate"].notna().any():
        return "offered rate (requests / s)"
    return "concurrency (closed loop)"


def _finish(fig, ax, out_dir: Path | None, name: str, title: str, xlabel: str, ylabel: str):
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, out_dir, name)


def _per_arm(df: pd.DataFrame):
    for (arm, label), g in df.groupby(["arm", "label"]):
        yield _label(arm, label), g.sort_values("load")


def latency_vs_load(df: pd.DataFrame, out_dir: Path | None = None, metric: str = "e2e_ms"):
    if df.empty:
        return None
    fig, ax = _figure()
    for name, g in _per_arm(df):  # one colour per arm: p50 solid, p99 dashed
        line, = ax.plot(g["load"], g[f"{metric}_p50"], "-o", label=f"{name} p50")
        ax.plot(g["load"], g[f"{metric}_p99"], "--s", color=line.get_color(), label=f"{name} p99")
    _mark_unranked(ax, df, "load", f"{metric}_p50")
    _mark_unranked(ax, df, "load", f"{metric}_p99", legend=False)
    short = metric.replace("_ms", "")
    return _finish(fig, ax, out_dir, f"{metric}_vs_load", f"{short.upper()} percentiles vs load", load_axis(df),
                   f"{short.upper()} latency (ms)")


def throughput_vs_concurrency(df: pd.DataFrame, out_dir: Path | None = None):
    if df.empty:
        return None
    fig, ax = _figure()
    for name, g in _per_arm(df):
        ax.plot(g["load"], g["output_throughput_tok_s"], "-o", label=name)
    _mark_unranked(ax, df, "load", "output_throughput_tok_s")
    return _finish(fig, ax, out_dir, "throughput_vs_concurrency", "Throughput vs load", load_axis(df),
                   "output throughput (tokens / s)")


def pareto(df: pd.DataFrame, out_dir: Path | None = None):
    """Throughput against tail latency: up and to the left is better."""
    if df.empty:
        return None
    fig, ax = _figure()
    for name, g in _per_arm(df):
        ax.plot(g["e2e_ms_p99"], g["output_throughput_tok_s"], "-o", label=name)
        for _, r in g.iterrows():
            ax.annotate(f"{r['load']:g}", (r["e2e_ms_p99"], r["output_throughput_tok_s"]), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")
    _mark_unranked(ax, df, "e2e_ms_p99", "output_throughput_tok_s")
    return _finish(fig, ax, out_dir, "pareto", "Throughput vs tail latency (points labelled by load)",
                   "p99 end-to-end latency (ms)", "output throughput (tokens / s)")


def ttft_distribution(requests: dict[str, pd.DataFrame], out_dir: Path | None = None):
    if not requests:
        return None
    fig, ax = _figure()
    for arm, df in requests.items():
        m = df[(df["phase"] == "measure") & df["ok"]]
        for point, g in m.groupby("point"):
            if len(g):
                sns.ecdfplot(x=g["ttft_ms"], ax=ax, label=f"{arm} {point}")
    return _finish(fig, ax, out_dir, "ttft_cdf", "TTFT distribution (empirical CDF)", "TTFT (ms)",
                   "fraction of requests")


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


def predicted_vs_measured(curves: pd.DataFrame, out_dir: Path | None = None):
    """The fitted closed-loop model's mean E2E against the measured points."""
    if curves.empty:
        return None
    fig, ax = _figure()
    for arm, g in curves.groupby("arm"):
        line, = ax.plot(g["concurrency"], g["predicted_e2e_ms"], "-", label=f"{arm} model")
        m = g.dropna(subset=["measured_e2e_ms"])
        ax.plot(m["concurrency"], m["measured_e2e_ms"], "o", color=line.get_color(), label=f"{arm} measured")
    return _finish(fig, ax, out_dir, "queueing_fit", "Queueing model (fitted on lightest and heaviest load) vs "
                   "measurement", "concurrency (closed loop)", "mean E2E (ms)")


def demand_bars(demand: dict, out_dir: Path | None = None, name: str = "demand_map"):
    """Capacity-adjusted demand per layer, the bottleneck highlighted."""
    rows = demand["layers"]
    fig, ax = _figure((6.5, 3.5))
    colors = ["tab:red" if r["name"] == demand["bottleneck"] else "tab:blue" for r in rows]
    ax.barh([r["name"] for r in rows], [r["adjusted_ms"] for r in rows], color=colors)
    for i, r in enumerate(rows):
        ax.text(r["adjusted_ms"], i, f" {r['adjusted_ms']:g} ms", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_ylabel("layer")
    ax.set_xlabel("capacity-adjusted demand D/m (ms per request)")
    ax.set_title(f"Bottleneck: {demand['bottleneck']} (bound {demand['throughput_bound_rps']:.1f} req/s)")
    ax.grid(alpha=0.3, axis="x")
    return _save(fig, out_dir, name)


def measured_demand_bars(maps: dict, out_dir: Path | None = None, name: str = "measured_demand_map"):
    """Per arm with a measured map: D/m per resource centre (bottleneck in red), titled with the
    bound beside the measured saturation throughput. None when no arm was measured."""
    measured = [d for d in maps.values() if d.measured]
    if not measured:
        return None
    fig, axes = _figure((6.5 * len(measured), 3.2), ncols=len(measured))
    for ax, d in zip(axes if len(measured) > 1 else [axes], measured):
        rows = d.centres
        ax.barh([r.centre for r in rows], [r.adjusted_ms for r in rows],
                color=["tab:red" if r.centre == d.bottleneck else "tab:blue" for r in rows])
        for i, r in enumerate(rows):
            ax.text(r.adjusted_ms, i, f" {r.adjusted_ms:,.0f} ms" if r.adjusted_ms >= 100 else f" {r.adjusted_ms:.3g} ms", va="center", fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("D/m (ms per request)")
        ax.set_title(f"{d.arm} at {d.point}: bound {d.bound_rps:.3g} req/s, measured "
                     f"{d.measured_saturation_rps or float('nan'):.3g} req/s", fontsize=9)
        ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    return _save(fig, out_dir, name)


def mva_centres_check(maps: dict, out_dir: Path | None = None, name: str = "mva_centres"):
    """MVA over each arm's measured centres against its closed-loop points: mean E2E per
    concurrency, one line per fit (demands at the lightest or the heaviest load)."""
    rows = [dict(r, arm=a) for a, d in maps.items() for r in d.mva_check]
    if not rows:
        return None
    df = pd.DataFrame(rows)
    fig, ax = _figure()
    for arm, g in df.groupby("arm"):
        m = g.drop_duplicates("concurrency")
        line, = ax.plot(m["concurrency"], m["measured_e2e_ms"], "o", ms=7, label=f"{arm} measured")
        for (fit, f), style in zip(g.groupby("fit", sort=False), ("--", ":")):
            ax.plot(f["concurrency"], f["predicted_e2e_ms"], style, color=line.get_color(), label=f"{arm} MVA, {fit}")
    return _finish(fig, ax, out_dir, name, "MVA on measured resource centres vs the closed-loop sweep",
                   "concurrency (closed loop)", "mean E2E (ms)")


def kingman_curves(cases=((1, 0), (1, 1), (2, 1), (1, 2)), out_dir: Path | None = None):
    """Mean wait over mean service time against utilization, for (Ca, Cs) pairs: Ca = 1 is
    Pollaczek-Khinchine; every curve diverges as utilization nears 1, faster with variance."""
    import numpy as np

    from stackbook.analysis.queueing import kingman_wait

    rho = np.linspace(0.05, 0.95, 50)
    fig, ax = _figure()
    for ca, cs in cases:
        ax.plot(rho, [kingman_wait(r, 1.0, ca, cs) for r in rho], label=f"Ca={ca}, Cs={cs}")
    ax.set_yscale("log")
    return _finish(fig, ax, out_dir, "kingman", "Kingman's approximation (Ca=1: Pollaczek-Khinchine)",
                   "utilization rho (busy fraction)", "mean wait / mean service time (ratio)")


def waits_vs_arrival_variance(points: pd.DataFrame, out_dir: Path | None = None):
    """Measured mean queue wait (with its 95% CI) against the measured C_a² of each open-loop
    point, beside Kingman's prediction and, at Poisson points, Pollaczek-Khinchine's: at one
    mean rate, the seed's claim that more arrival variance means longer waits, as data."""
    if points.empty or points["wait_ms_mean"].notna().sum() == 0:
        return None
    df = points.assign(ca2=points["arrival_cv"] ** 2).dropna(subset=["ca2"]).sort_values("ca2")
    fig, ax = _figure()
    for server, g in df.groupby("server", sort=False):
        m = g.dropna(subset=["wait_ms_mean"])
        if m.empty:
            continue
        ax.errorbar(m["ca2"], m["wait_ms_mean"], yerr=m["wait_ms_ci95"].fillna(0).to_numpy(), fmt="o", capsize=4,
                    label=f"measured ({server})")
    k = df.dropna(subset=["kingman_ms"])
    if not k.empty:
        ax.plot(k["ca2"], k["kingman_ms"], "s", label="Kingman G/G/1 (each point's own ρ, S, C_s)")
    pk = df.dropna(subset=["pk_ms"])
    if not pk.empty:
        ax.plot(pk["ca2"], pk["pk_ms"], "*", ms=14, label="Pollaczek-Khinchine (Poisson)")
    for _, r in df.dropna(subset=["wait_ms_mean"]).iterrows():
        ax.annotate(r["arrival"], (r["ca2"], r["wait_ms_mean"]), fontsize=7, xytext=(5, 5), textcoords="offset points")
    _mark_unranked(ax, df, "ca2", "wait_ms_mean")
    rates = sorted({f"{x:g}" for x in df["rate_rps"].dropna()})
    at = f" at {', '.join(rates)} req/s" if rates else ""
    return _finish(fig, ax, out_dir, "waits_vs_arrival_variance", f"Mean queue wait against arrival variance{at}",
                   "measured C_a² (squared CV of inter-arrival times)", "mean queue wait (ms)")


def mva_throughput(curve: pd.DataFrame, bound_rps: float, out_dir: Path | None = None):
    """Closed-network throughput against the number of clients, with the bottleneck's bound."""
    fig, ax = _figure()
    ax.plot(curve["n"], curve["throughput"], "-o", ms=3, label="throughput (req/s)")
    ax.axhline(bound_rps, ls="--", color="gray", label="bound 1/D_max")
    return _finish(fig, ax, out_dir, "mva", "Mean Value Analysis: throughput as clients are added", "clients N",
                   "throughput (requests / s)")
