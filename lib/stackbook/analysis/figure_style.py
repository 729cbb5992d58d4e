"""What every stackbook figure shares: its own matplotlib Figure (no pyplot state, so nothing is
shown twice or leaks between cells), saved as PNG under figures/, displayed inline with alt text,
the legend beside the axes, unranked points marked by reason, integer ticks for a count of
clients and axes from zero (or log, labelled so) where values span decades."""
from __future__ import annotations

import io
import re
import textwrap
from pathlib import Path

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from stackbook.loadgen.load_point import frame_unit
from stackbook.measure.validity import sent_label

STYLE = "whitegrid"
UNRANKED_MARKER = dict(marker="X", s=90, color="black", zorder=6)


def alt_text(fig) -> str:
    """What a figure shows, in words, for a reader who cannot see it: each panel's title, axes
    and the series in its legend."""
    parts = []
    shared_x = next((ax.get_xlabel() for ax in fig.axes if ax.get_xlabel()), "")  # panels stacked on one axis
    for ax in fig.axes:
        if not ax.get_title() and not ax.get_ylabel():
            continue  # a colour bar or an empty panel
        legend = ax.get_legend()
        series = [t.get_text() for t in legend.get_texts()] if legend else []
        text = f"{ax.get_title() or 'panel'}: {ax.get_ylabel()} against {ax.get_xlabel() or shared_x}"
        parts.append(text + (f"; series: {', '.join(series[:12])}" + (" ..." if len(series) > 12 else "")
                             if series else ""))
    title = fig._suptitle.get_text() + ". " if getattr(fig, "_suptitle", None) else ""
    return (title + ". ".join(parts)) or "figure"


DPI = 110
SAVED_PNG = "_stackbook_png"  # the bytes _save wrote, shown as they are


def _register_inline_png() -> None:
    """In an IPython kernel, a Figure displays as PNG whatever the matplotlib backend is (the
    runner's kernels may run with MPLBACKEND=Agg, which would otherwise show only its repr), with
    its alt text in the output's metadata (the report's template writes it into the <img>)."""
    try:
        from IPython import get_ipython
        from IPython.core.pylabtools import print_figure
    except ImportError:
        return
    ip = get_ipython()
    if ip is not None:
        ip.display_formatter.formatters["image/png"].for_type(
            Figure,
            lambda fig: (getattr(fig, SAVED_PNG, None) or print_figure(fig, "png", bbox_inches="tight", dpi=DPI),
                                 {"alt": alt_text(fig)}))


_register_inline_png()


def _figure(figsize=(6.5, 4), ncols: int = 1, nrows: int = 1, **kw):
    with sns.axes_style(STYLE):
        fig = Figure(figsize=figsize)
        axes = fig.subplots(nrows, ncols, **kw)
    return fig, axes


def _save(fig, out_dir: Path | None, name: str):
    """The figure written under out_dir as PNG; the same bytes are what the notebook shows, so a
    figure is rendered once (every figure is finished when it is saved)."""
    _register_inline_png()  # again: the inline backend, set up when pyplot is first used, replaces it
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
        (out_dir / f"{name}.png").write_bytes(buf.getvalue())
        setattr(fig, SAVED_PNG, buf.getvalue())
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


UNRANKED_MARKERS = ("X", "P", "D", "v", "^", "s")
RULE_DETAIL = re.compile(r"\((\w+): [^)]*\)")


def short_reason(status: str) -> str:
    """A point's status without the measured values behind its rule: "discarded (on_invalid_load:
    configured_rate_rps=0.5, ...)" reads "discarded (on_invalid_load)"; the values stay in the tables."""
    return RULE_DETAIL.sub(r"(\1)", status)


def _mark_unranked(ax, df: pd.DataFrame, x: str, y: str, legend: bool = True) -> None:
    """A black marker on every point that is not ranked, one marker shape per reason, the
    reason in the legend (never as text on the plot, where long rule names overlap)."""
    status = point_status(df)
    bad = df[status != "accepted"].dropna(subset=[x, y])
    if bad.empty:
        return
    reasons = status[bad.index].map(short_reason)
    for marker, reason in zip(UNRANKED_MARKERS * 4, sorted(reasons.unique())):
        mine = bad[reasons == reason]
        ax.scatter(mine[x], mine[y], label=f"not ranked: {textwrap.shorten(reason, 70)}" if legend else "_nolegend_",
                   **{**UNRANKED_MARKER, "marker": marker})


def load_ticks(ax, df: pd.DataFrame) -> None:
    """A closed loop's load is a count of clients: ticks at the levels measured, never at 1.5. An
    open loop's ticks sit at the rates named, each labelled with what its seeded schedules sent
    where they strayed (measure.validity.sent_label)."""
    if frame_unit(df) == "offered rate":
        if "scheduled_rate_rps" in df and "load" in df:
            rates = sorted({float(v) for v in df["load"].dropna()})
            ax.set_xticks(rates)
            ax.set_xticklabels([sent_label(r, list(df.loc[df["load"] == r, "scheduled_rate_rps"])) for r in rates])
            ax.xaxis.set_minor_locator(NullLocator())
        return
    levels = sorted({float(v) for v in df["load"].dropna()}) if "load" in df else []
    if levels and all(v.is_integer() for v in levels):
        ax.set_xticks(levels)
        ax.set_xticklabels([f"{v:g}" for v in levels])
        ax.xaxis.set_minor_locator(NullLocator())


def spans_decades(values, ratio: float = 30.0) -> bool:
    """Values whose positive range spans more than `ratio` (about one and a half decades)."""
    v = pd.Series(values, dtype=float).dropna()
    v = v[v > 0]
    return len(v) > 1 and v.max() / v.min() > ratio


def scale_axis(ax, values, axis: str = "y") -> str:
    """A log axis where values span decades, else a linear one from zero; returns the label
    suffix that says which."""
    if spans_decades(values):
        (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
        return " (log scale)"
    if axis == "y":
        ax.set_ylim(bottom=0)
    else:
        ax.set_xlim(left=0)
    return ""


def load_axis(df: pd.DataFrame) -> str:
    """Closed-loop sweeps are plotted against concurrency, open-loop ones against offered rate."""
    return {"offered rate": "offered rate (requests / s)", "trace speed": "trace replay speed (1: as recorded)",
            "concurrency": "concurrency (closed loop)"}[frame_unit(df)]


TAIL_ORDER = (99, 95, 50)


def carried_tail(df: pd.DataFrame, metric: str = "e2e_ms", count: str = "completed") -> tuple[str, str]:
    """The highest percentile of `metric` that every point's sample can carry (p99 needs 100
    requests, p95 20), as (column, axis name): a figure never draws a "p99" that is its sample's
    maximum; the name says what was wanted and why it fell back."""
    counts = pd.to_numeric(df[count], errors="coerce").dropna() if count in df else pd.Series(dtype=float)
    from stackbook.analysis.decision import min_sample

    if counts.empty:  # sample sizes not recorded: the points' own p99, as they name it
        return (f"{metric}_p99", "p99") if f"{metric}_p99" in df else (f"{metric}_p50", "p50")
    n = f"n={int(counts.min())}" + (f"-{int(counts.max())}" if counts.max() != counts.min() else "")

    for pct in TAIL_ORDER:
        column = f"{metric}_p{pct}"
        if column in df and counts.min() >= min_sample(pct):
            return column, (f"p{pct}" if pct == TAIL_ORDER[0] else
                            f"p{pct} ({n} a point: too few for a p99)")
    if f"{metric}_p50" in df:
        return f"{metric}_p50", f"p50 ({n} a point: too few for a p99)"
    stored = next((p for p in TAIL_ORDER if f"{metric}_p{p}" in df), 50)  # a point summary without its median
    return f"{metric}_p{stored}", f"p{stored} as stored ({n} a point: too few to carry it)"


def _finish(fig, ax, out_dir: Path | None, name: str, title: str, xlabel: str, ylabel: str):
    """Labels, and the legend beside the axes (outside them, so it never hides a point)."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    return _save(fig, out_dir, name)


def _per_arm(df: pd.DataFrame):
    for (arm, label), g in df.groupby(["arm", "label"]):
        yield _label(arm, label), g.sort_values("load")
