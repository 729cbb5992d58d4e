"""Whether a point ran in a steady state or its queue grew while it was measured. Percentiles of
a point whose queue kept growing describe how long the point lasted, not the load: run it longer
and they grow. An over-saturated point is outside any latency SLO whatever its percentiles say.

The measurement window is cut into time slices; the trend of TTFT against send time and of the
requests in flight across slices is fitted with Theil-Sen (robust to a few slow requests) and
judged by its confidence interval: the queue grew when the slope's whole interval lies above zero
and the rise over the window is material (more than GROWTH_THRESHOLD of the level)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from scipy import stats

from stackbook.measure.metric_definitions import in_flight_mean, ttft_ms

SLICES = 4                  # time slices of the measurement window
GROWTH_THRESHOLD = 0.10     # a rise over the window smaller than 10% of the level is not growth
MIN_REQUESTS = 12           # fewer measured requests than this cannot show a trend
TREND_SAMPLE = 2000         # Theil-Sen is quadratic: a longer series is fitted on every k-th point
STEADY, GREW, TOO_FEW = "steady", "queue grew", "too few requests to tell"


class Trend(NamedTuple):
    """One quantity's fitted rise over the window, with the slope's interval, per second."""
    level: float
    slope_per_s: float
    slope_lo: float
    slope_hi: float
    rise: float           # slope x window: how much it grew from the first send to the last

    def grew(self) -> bool:
        return self.slope_lo > 0 and self.level > 0 and self.rise > GROWTH_THRESHOLD * self.level


class SteadyState(NamedTuple):
    verdict: str
    reason: str
    ttft: Trend | None
    in_flight: Trend | None
    in_flight_by_slice: list[float]

    def as_dict(self) -> dict:
        return {"verdict": self.verdict, "reason": self.reason, "slices": len(self.in_flight_by_slice),
                "in_flight_by_slice": [round(x, 3) for x in self.in_flight_by_slice],
                "ttft_trend": None if self.ttft is None else {k: round(v, 4) for k, v in self.ttft._asdict().items()},
                "in_flight_trend": None if self.in_flight is None else
                {k: round(v, 4) for k, v in self.in_flight._asdict().items()}}


def trend(x: Sequence[float], y: Sequence[float], window_s: float, confidence: float = 0.95) -> Trend:
    """Theil-Sen slope of y against x with its interval, the level (median of y) and the rise.
    A series longer than TREND_SAMPLE is fitted on an even stride through it (in x order), so the
    interval is that of the smaller sample: wider, never narrower than the whole series would give."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    level = float(np.median(y))
    if len(x) > TREND_SAMPLE:
        keep = np.argsort(x, kind="stable")[np.linspace(0, len(x) - 1, TREND_SAMPLE).round().astype(int)]
        x, y = x[keep], y[keep]
    slope, _, lo, hi = stats.theilslopes(y, x, alpha=confidence)
    return Trend(level, float(slope), float(lo), float(hi), float(slope * window_s))


def slice_in_flight(records: Sequence, start: float, end: float, slices: int = SLICES) -> list[float]:
    """The time-weighted mean number of these requests in flight in each of `slices` equal slices."""
    edges = np.linspace(start, end, slices + 1)
    return [in_flight_mean(records, float(a), float(b)) or 0.0 for a, b in zip(edges[:-1], edges[1:])]


def steady_state(records: Sequence, slices: int = SLICES, confidence: float = 0.95) -> SteadyState:
    """Judge one point from its measured requests (objects with sent_s, first_token_s, end_s, ok)."""
    done = [r for r in records if getattr(r, "ok", True) and ttft_ms(r) is not None]
    if len(done) < MIN_REQUESTS:
        return SteadyState(TOO_FEW, f"{len(done)} completed requests; a trend needs at least {MIN_REQUESTS}",
                           None, None, [])
    start, end = min(r.sent_s for r in records), max(r.end_s for r in records)
    window = end - start
    by_slice = slice_in_flight(records, start, end, slices)
    ttft = trend([r.sent_s - start for r in done], [ttft_ms(r) for r in done], window, confidence)
    mids = [(i + 0.5) * window / slices for i in range(slices)]
    flight = trend(mids, by_slice, window, confidence)
    grew = [name for name, t in (("TTFT", ttft), ("requests in flight", flight)) if t.grew()]
    if grew:
        return SteadyState(GREW, " and ".join(grew) + " rose over the window (TTFT "
                           f"{ttft.level:,.0f} ms, +{ttft.rise:,.0f} ms; in flight by slice "
                           f"{', '.join(f'{x:.2f}' for x in by_slice)}): the point is over-saturated, "
                           "outside the SLO whatever its percentiles", ttft, flight, by_slice)
    return SteadyState(STEADY, f"no material rise of TTFT or requests in flight over {slices} slices of "
                       f"{window:,.1f} s", ttft, flight, by_slice)
