"""The interactivity frontier: what one user gets (tokens/s per user) against what the hardware
serves (output tokens/s per device), per arm and load, both with their intervals. It is the
field's standard picture (InferenceX's `intvty` = 1/TPOT against throughput per GPU; vLLM's
`bench sweep plot_pareto`); on a CPU host the device is one logical CPU, and the axis says so.

Both axes come from the verdict's load table, so the figure never disagrees with it: tokens/s per
user is 1000 / TPOT p50 (its interval is the TPOT interval inverted), output tokens/s per device
is output throughput / devices."""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pandas as pd

from stackbook.analysis.decision import confidence_text
from stackbook.analysis.figure_scale import decided_top, mark_off_scale
from stackbook.analysis.figure_style import _figure, _save
from stackbook.measure.metric_definitions import figure

PER_USER = "tokens/s per user"
TPOT_P50 = figure("tpot_ms", "p50").name  # the load table's figure a user's rate is read from


class Devices(NamedTuple):
    """What throughput is divided by: how many, and what one is called on the axis."""
    count: int
    name: str


def host_devices(manifest: dict) -> Devices:
    """The devices of the host the run measured: its logical CPUs (a CPU host's 'device')."""
    host = (manifest.get("harness_ceiling") or {}).get("host") or {}
    return Devices(int(host.get("logical_cpus") or 1), "logical CPU")


def _per_user(tpot_ms: float | None) -> float | None:
    return 1000.0 / tpot_ms if tpot_ms and tpot_ms > 0 else None


def interactivity_table(table: pd.DataFrame, devices: Devices) -> pd.DataFrame:
    """Per arm and load: tokens/s per user and output tokens/s per device, each with its interval,
    and whether another point beats it decidedly on both (its intervals clear this one's)."""
    if table.empty or TPOT_P50 not in table:
        return pd.DataFrame()
    per_device = f"output tokens/s per {devices.name}"
    rows = []
    for _, r in table.iterrows():
        rows.append({"arm": r["arm"], "load": r["load"], "status": r["status"], "repetitions": r.get("repetitions"),
                     PER_USER: _per_user(r[TPOT_P50]), f"{PER_USER} lo": _per_user(r[f"{TPOT_P50}_hi"]),
                     f"{PER_USER} hi": _per_user(r[f"{TPOT_P50}_lo"]),
                     per_device: r["output_throughput"] / devices.count,
                     f"{per_device} lo": _scaled(r["output_throughput_lo"], devices),
                     f"{per_device} hi": _scaled(r["output_throughput_hi"], devices)})
    out = pd.DataFrame(rows)
    out["dominated by"] = [_dominated_by(out, i, per_device) for i in out.index]
    return out


def _scaled(x, devices: Devices):
    return None if x is None or pd.isna(x) else x / devices.count


def _dominated_by(frame: pd.DataFrame, i: int, per_device: str) -> str:
    """The ranked points whose intervals lie above this one's on both axes (none: on the frontier)."""
    p = frame.loc[i]
    beaters = []
    for j, q in frame.iterrows():
        if j == i or q["status"] != "accepted":
            continue
        bounds = (q[f"{PER_USER} lo"], p[f"{PER_USER} hi"], q[f"{per_device} lo"], p[f"{per_device} hi"])
        if any(b is None or pd.isna(b) for b in bounds):
            continue
        if bounds[0] > bounds[1] and bounds[2] > bounds[3]:
            beaters.append(f"{q['arm']} at {q['load']:g}")
    return ", ".join(beaters)


def interactivity_figure(table: pd.DataFrame, devices: Devices, confidence: float, out_dir: Path | None = None):
    """Tokens/s per user against output tokens/s per device, one line per arm through its loads."""
    frame = interactivity_table(table, devices)
    if frame.empty:
        return None
    per_device = f"output tokens/s per {devices.name}"
    fig, ax = _figure()
    weak = pd.to_numeric(frame["repetitions"], errors="coerce").fillna(0) < 3  # one degree of freedom or none
    top = decided_top(frame[PER_USER], frame.loc[~weak, f"{PER_USER} hi"], frame.loc[weak, f"{PER_USER} hi"])
    cut = 0
    for arm, g in frame.groupby("arm", sort=False):
        g = g.sort_values("load")
        x, y = g[per_device].astype(float), g[PER_USER].astype(float)
        xerr = [(x - g[f"{per_device} lo"].astype(float)).fillna(0).clip(lower=0),
                (g[f"{per_device} hi"].astype(float) - x).fillna(0).clip(lower=0)]
        yerr = [(y - g[f"{PER_USER} lo"].astype(float)).fillna(0).clip(lower=0),
                (g[f"{PER_USER} hi"].astype(float) - y).fillna(0).clip(lower=0)]
        line = ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="-o", capsize=3, label=arm)
        for (_, r), xi, yi in zip(g.iterrows(), x, y):
            ax.annotate(f"{r['load']:g}", (xi, yi), fontsize=7, xytext=(4, 4), textcoords="offset points",
                        color=line.lines[0].get_color())
            if r["status"] != "accepted":
                ax.scatter([xi], [yi], s=80, facecolors="white", edgecolors=line.lines[0].get_color(), zorder=5)
        if top is not None:
            cut += mark_off_scale(ax, x, g[f"{PER_USER} hi"].astype(float), top, line.lines[0].get_color(), cut == 0)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0, top=top)
    ax.set_title(f"Interactivity against throughput per {devices.name} ({devices.count} on this host)\n"
                 f"points labelled by load; {confidence_text(confidence)} intervals; hollow: not ranked")
    ax.set_xlabel(f"{per_device} (output throughput / {devices.count})")
    ax.set_ylabel(f"{PER_USER} (1000 / TPOT p50)" + ("; clipped to the points on 2+ degrees of freedom" if top else ""))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, out_dir, "interactivity")
