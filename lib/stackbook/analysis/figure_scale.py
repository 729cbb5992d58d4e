"""What a figure's scale and colours may claim: one distinct colour per series however many there
are (a palette that cycles draws two series alike), and an axis clipped to the range its decided
points span, so one interval resting on a single degree of freedom does not flatten the rest;
the intervals it cuts are marked at the edge, never dropped."""
from __future__ import annotations

import math

import seaborn as sns

BASE_PALETTE = "deep"  # seaborn's default cycle: 10 colours, distinct up to BASE_COLOURS series
BASE_COLOURS = 8
SLACK = 1.15  # head room above the highest point kept on scale
OFF_SCALE_LABEL = "interval runs off scale (to the value written)"
WEAK_LABEL = "decision on < 2 degrees of freedom: weak"


def series_colours(n: int) -> list[tuple[float, float, float]]:
    """n colours, all distinct: the default cycle up to 8 series, evenly spaced hues past it."""
    if n <= 0:
        return []
    if n <= BASE_COLOURS:
        return list(sns.color_palette(BASE_PALETTE, n))
    return list(sns.color_palette("husl", n))


def _finite(values) -> list[float]:
    return [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]


def decided_top(estimates, kept_highs, weak_highs, slack: float = SLACK) -> float | None:
    """The top of a from-zero axis: the estimates and the upper ends of the intervals that rest on
    two or more degrees of freedom, with head room; None where no weak interval reaches past it
    (the axis then takes every interval as it is)."""
    shown = _finite(estimates) + _finite(kept_highs)
    if not shown:
        return None
    top = max(shown) * slack
    return top if top > 0 and any(h > top for h in _finite(weak_highs)) else None


def mark_off_scale(ax, xs, highs, top: float, colour, label: bool = True) -> int:
    """An upward triangle at the top edge over each interval cut by the axis, with its true upper
    end written beside it; returns how many were cut."""
    cut = [(x, h) for x, h in zip(xs, highs) if h is not None and not math.isnan(float(h)) and float(h) > top]
    for i, (x, h) in enumerate(cut):
        ax.scatter([x], [top], marker="^", s=60, color=colour, clip_on=False, zorder=7,
                   label=OFF_SCALE_LABEL if label and i == 0 else "_nolegend_")
        ax.annotate(f"to {float(h):.3g}", (x, top), fontsize=7, xytext=(5, -10), textcoords="offset points",
                    color=colour, annotation_clip=False)
    return len(cut)
