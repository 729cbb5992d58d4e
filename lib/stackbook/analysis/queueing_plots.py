"""Figures of the queueing and demand models: the fitted closed network against the sweep, the
demand per layer or resource centre, Kingman's curves and the open-loop waits."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.ticker import MaxNLocator

from stackbook.analysis.figure_style import _figure, _finish, _mark_unranked, _save, scale_axis


def predicted_vs_measured(curves: pd.DataFrame, out_dir: Path | None = None):
    """The fitted closed-loop model's mean E2E against the measured points."""
    if curves.empty:
        return None
    fig, ax = _figure()
    for arm, g in curves.groupby("arm"):
        line, = ax.plot(g["concurrency"], g["predicted_e2e_ms"], "-", label=f"{arm} model")
        m = g.dropna(subset=["measured_e2e_ms"])
        ax.plot(m["concurrency"], m["measured_e2e_ms"], "o", color=line.get_color(), label=f"{arm} measured")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    scale = scale_axis(ax, pd.concat([curves["predicted_e2e_ms"], curves["measured_e2e_ms"]]))
    return _finish(fig, ax, out_dir, "queueing_fit", "Queueing model (fitted on lightest and heaviest load) vs "
                   "measurement", "concurrency (closed loop)", f"mean E2E (ms){scale}")


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
            ax.text(r.adjusted_ms, i, f" {r.adjusted_ms:,.0f} ms" if r.adjusted_ms >= 100
                    else f" {r.adjusted_ms:.3g} ms", va="center", fontsize=8)
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
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    scale = scale_axis(ax, pd.concat([df["predicted_e2e_ms"], df["measured_e2e_ms"]]))
    return _finish(fig, ax, out_dir, name, "MVA on measured resource centres vs the closed-loop sweep",
                   "concurrency (closed loop)", f"mean E2E (ms){scale}")


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
