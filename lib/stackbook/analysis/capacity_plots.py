"""The capacity search as a picture: each arm's probes in the order they ran, by concurrency and
verdict, with the interval the repetitions agree on shaded, so the reader sees how the answer was
reached, not only the answer."""
from __future__ import annotations

from pathlib import Path

from matplotlib.ticker import MaxNLocator

from stackbook.analysis.figure_style import _figure, _save

MARKERS = {"inside": ("o", "tab:green"), "outside": ("X", "tab:red"), "undecided": ("s", "tab:gray")}


def capacity_search_figure(capacity: list[dict], arms: dict, out_dir: Path | None = None):
    """One panel row per arm: x = probe number within its repetition's search, y = concurrency."""
    rows = [r for r in capacity if (arms.get(r["arm"], {}).get("results") or {}).get("capacity")]
    if not rows:
        return None
    fig, axes = _figure(nrows=len(rows), figsize=(8, 2.6 * len(rows)), squeeze=False)
    for ax, row in zip(axes[:, 0], rows):
        rounds = arms[row["arm"]]["results"]["capacity"]["rounds"]
        if row["lower"] is not None and row["upper"] is not None:
            ax.axhspan(row["lower"], row["upper"], color="tab:blue", alpha=0.12,
                       label=f"capacity from {row['lower']:g} to below {row['upper']:g}")
        for k, (rep, r) in enumerate(rounds.items()):
            xs = [i + 1 + 0.12 * k for i in range(len(r["probes"]))]
            ax.plot(xs, [p["load"] for p in r["probes"]], "-", color="0.7", lw=0.8, zorder=1)
            for x, p in zip(xs, r["probes"]):
                m, c = MARKERS[p["verdict"]]
                ax.scatter([x], [p["load"]], marker=m, color=c, s=45, zorder=3)
        for v, (m, c) in MARKERS.items():
            ax.scatter([], [], marker=m, color=c, label=v)
        ax.set_title(f"{row['arm']}: {row['probes']} probes over {row['repetitions']} repetition(s), "
                     f"{row['probing_s']:g} s of probing", fontsize=9)
        ax.set_ylabel("concurrent users")
        ax.set_ylim(bottom=0)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    axes[-1, 0].set_xlabel("probe, in the order the search ran it (repetitions side by side)")
    return _save(fig, out_dir, "capacity_search")
