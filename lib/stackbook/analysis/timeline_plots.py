"""Figures over the time of an arm's sweep: one line per request, output throughput, and the
engine's CPU and resident memory, with the points' spans shaded so each load level can be found."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from stackbook.analysis import timelines
from stackbook.analysis.figure_style import _figure, _save
from stackbook.loadgen.records import RequestRecord

TIMELINE_ROWS = 2000  # the most requests one timeline draws a line for

PHASE_COLOURS = {"warmup": "tab:orange", "measure": "tab:blue", "cooldown": "tab:purple", "sentinel": "tab:green"}


def _ordinal(k: int) -> str:
    return f"{k}{'th' if 10 <= k % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


def _shade_points(ax, spans) -> None:
    for i, (_, s) in enumerate(spans.iterrows()):
        ax.axvspan(s["start"], s["end"], color="0.92" if i % 2 else "0.97", zorder=0)
        ax.annotate(s["point"], (s["start"], 1), xycoords=("data", "axes fraction"), fontsize=7,
                    xytext=(2, -10), textcoords="offset points")


def request_timeline(records: list[RequestRecord], out_dir: Path | None = None, arm: str = ""):
    """One row per request in send order: a thin grey line from send to first token (waiting and
    prefill), a thick one from first token to last byte (decoding), coloured by phase (warm-up
    and cool-down are not measured); a failed request is a red cross at its end."""
    frame = timelines.request_timeline(records)
    if frame.empty:
        return None
    fig, ax = _figure((11, min(8, 2 + 0.04 * len(frame))))
    n = len(frame)
    # No more rows than the figure has pixels for: a long point draws every k-th request (each
    # failure still gets its cross), and the title says so.
    step = -(-n // TIMELINE_ROWS)
    shown = frame.iloc[::step]
    rows = np.arange(n)[::step]
    first = shown["first_token"].astype(float).fillna(shown["end"].astype(float)).to_numpy()
    ax.hlines(rows, shown["sent"].to_numpy(float), first, color="0.6", lw=0.8)
    ax.hlines(rows, first, shown["end"].to_numpy(float),
              colors=[PHASE_COLOURS.get(p, "black") for p in shown["phase"]], lw=2.2)
    failed = ~frame["ok"].astype(bool).to_numpy()
    if failed.any():
        ax.plot(frame["end"].to_numpy(float)[failed], np.arange(n)[failed], "x", color="tab:red", linestyle="none")
    for phase, colour in PHASE_COLOURS.items():
        if (frame["phase"] == phase).any():
            ax.plot([], [], color=colour, lw=2.2, label=f"{phase}: first token to last byte")
    ax.plot([], [], color="0.6", lw=0.8, label="send to first token")
    _shade_points(ax, timelines.point_spans(records))
    ax.invert_yaxis()
    ax.set_xlim(left=0)
    ax.set(xlabel="seconds since the arm's first send", ylabel="request (send order)",
           title=f"Per-request timeline{' · ' + arm if arm else ''} "
               + (f"({n:,} requests)" if step == 1 else f"(every {_ordinal(step)} of {n:,} requests)"))
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    return _save(fig, out_dir, "request_timeline")


def throughput_over_time(records: list[RequestRecord], out_dir: Path | None = None, arm: str = ""):
    """Output tokens streamed per second across the sweep, the points shaded."""
    series = timelines.throughput_over_time(records)
    if series.empty:
        return None
    fig, ax = _figure((11, 3.2))
    ax.step(series["t"], series["tokens_per_s"], where="mid", color="tab:blue", label="output tokens / s (1 s bins)")
    _shade_points(ax, timelines.point_spans(records))
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set(xlabel="seconds since the arm's first send", ylabel="output throughput (tokens / s)",
           title=f"Output throughput over time{' · ' + arm if arm else ''}")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    return _save(fig, out_dir, "throughput_over_time")


def engine_resources_over_time(samples_path: str | os.PathLike, records: list[RequestRecord],
                               out_dir: Path | None = None, arm: str = ""):
    """The engine's CPU (cores busy) and resident memory (GiB, whole process group) over the
    sweep, from the samples taken beside the load; None when the run kept none."""
    samples = timelines.read_engine_samples(samples_path, timelines.first_send_unix(records))
    if samples.empty:
        return None
    fig, (cpu, rss) = _figure((11, 4.6), nrows=2, sharex=True)
    cpu.plot(samples["t"], samples["cpu_cores"], color="tab:red")
    rss.plot(samples["t"], samples["rss_gib"], color="tab:green")
    spans = timelines.point_spans(records)
    for ax in (cpu, rss):
        _shade_points(ax, spans)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    cpu.set(ylabel="CPU (cores busy)", title=f"Engine CPU and resident memory over time{' · ' + arm if arm else ''}")
    rss.set(ylabel="RSS (GiB)", xlabel="seconds since the arm's first send")
    fig.tight_layout()
    return _save(fig, out_dir, "engine_resources")
