"""Whether an open-loop point ran in a steady state or its queue grew while it was measured.
Percentiles of a point whose queue kept growing describe how long the point lasted, not the load:
run it longer and they grow.

A queue grows when arrivals outpace completions, so the test reads the number of requests in the
system (sent and not yet ended: queued inside the engine or being served) that each arrival
found, and fits its trend against send time with Theil-Sen. That count is strongly
autocorrelated (one busy spell spans many arrivals), so the slope's interval is widened by the
Hamed-Rao correction of the Mann-Kendall variance (Hamed and Rao, J. Hydrology 204, 1998) rather
than read as if each arrival were independent. The queue grew when all three hold:

* the slope's whole interval lies above zero;
* the rise over the window is at least MIN_RISE requests and GROWTH_THRESHOLD of the level;
* the rise is at least SPREADS times the count's spread around its own trend. A stable queue
  wanders about its level by about that spread, and a line fitted over one wander seldom rises
  by several of it; a queue past capacity keeps 1 - 1/utilisation of its arrivals, so its rise
  grows with the window while its spread grows with the square root of it.

TTFT's trend is fitted and reported beside it, never as the test: a rising TTFT over a short
Poisson window is ordinary at moderate load. benchmarks/steady_state_power.py measures the test's
false-alarm and detection rates on simulated queues (results/steady_state_power.json)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from scipy import stats

from stackbook.measure.metric_definitions import in_flight_mean, ttft_ms

SLICES = 4                  # time slices of the measurement window, shown beside the test
MIN_RISE = 1.0              # a queue that grew by less than one whole request did not grow
GROWTH_THRESHOLD = 0.10     # ... nor one that grew by less than 10% of its level
SPREADS = 5.5               # ... nor one whose rise is under 5.5 spreads of the count about its trend
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


class QueueTrend(NamedTuple):
    """The number in system each arrival found, fitted against send time: its level (mean),
    slope with the autocorrelation-corrected interval, rise over the window, the fitted count at
    the first and last arrival, the spread about the fit, and the variance factor applied."""
    level: float
    slope_per_s: float
    slope_lo: float
    slope_hi: float
    rise: float
    first: float
    last: float
    spread: float
    variance_factor: float
    arrivals: int

    def grew(self) -> bool:
        return self.slope_lo > 0 and self.rise >= needed_rise(self.level, self.spread)


class SteadyState(NamedTuple):
    verdict: str
    reason: str
    ttft: Trend | None
    in_flight: QueueTrend | None
    in_flight_by_slice: list[float]

    def as_dict(self) -> dict:
        return {"verdict": self.verdict, "reason": self.reason, "slices": len(self.in_flight_by_slice),
                "in_flight_by_slice": [round(x, 3) for x in self.in_flight_by_slice],
                "ttft_trend": None if self.ttft is None else {k: round(v, 4) for k, v in self.ttft._asdict().items()},
                "in_flight_trend": None if self.in_flight is None else
                {k: round(v, 4) for k, v in self.in_flight._asdict().items()}}


def needed_rise(level: float, spread: float) -> float:
    """The smallest rise over the window that counts as growth, in requests."""
    return max(MIN_RISE, GROWTH_THRESHOLD * level, SPREADS * spread)


def trend(x: Sequence[float], y: Sequence[float], window_s: float, confidence: float = 0.95) -> Trend:
    """Theil-Sen slope of y against x with its interval, the level (median of y) and the rise.
    A series longer than TREND_SAMPLE is fitted on an even stride through it (in x order), so the
    interval is that of the smaller sample: wider, never narrower than the whole series would give."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    level = float(np.median(y))
    x, y = _stride(x, y)
    slope, _, lo, hi = stats.theilslopes(y, x, alpha=confidence)
    return Trend(level, float(slope), float(lo), float(hi), float(slope * window_s))


def _stride(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if len(x) <= TREND_SAMPLE:
        return x, y
    keep = np.argsort(x, kind="stable")[np.linspace(0, len(x) - 1, TREND_SAMPLE).round().astype(int)]
    return x[keep], y[keep]


def number_in_system(records: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """Each request's send time and the number of these requests in the system it found there:
    sent before it and not yet ended (a request ends after it is sent)."""
    sent = np.sort(np.array([r.sent_s for r in records], float))
    ends = np.sort(np.array([r.end_s for r in records], float))
    found = np.searchsorted(sent, sent, "left") - np.searchsorted(ends, sent, "right")
    return sent, np.maximum(found, 0).astype(float)


def hamed_rao_factor(x: np.ndarray, y: np.ndarray, slope: float) -> float:
    """How much autocorrelation inflates the Mann-Kendall variance of y's trend (Hamed and Rao
    1998, n/n*): from the ranks of the detrended series (in x order) and the lags whose
    autocorrelation is significant at 5%. Never below 1: the interval is never narrower than
    the one independent arrivals would give."""
    n = len(y)
    if n < 3:
        return 1.0
    order = np.argsort(x, kind="stable")
    r = stats.rankdata((y - slope * x)[order])
    r -= r.mean()
    den = float(r @ r)
    if den == 0:
        return 1.0
    acf = np.correlate(r, r, "full")[n:] / den  # lags 1 .. n-1
    k = np.arange(1, n)
    significant = np.abs(acf) > stats.norm.ppf(0.975) / np.sqrt(n)
    total = float(np.sum(((n - k) * (n - k - 1) * (n - k - 2) * acf)[significant]))
    return max(1.0, 1.0 + 2.0 * total / (n * (n - 1) * (n - 2)))


def _ties(v: np.ndarray) -> float:
    _, counts = np.unique(v, return_counts=True)
    counts = counts[counts > 1].astype(float)
    return float(np.sum(counts * (counts - 1) * (2 * counts + 5)))


def corrected_slope(x: np.ndarray, y: np.ndarray, confidence: float = 0.95) -> tuple[float, float, float, float]:
    """Theil-Sen slope with Sen's (1968) interval, its variance multiplied by the Hamed-Rao factor:
    (slope, lo, hi, factor). With a factor of 1 it is scipy's theilslopes interval."""
    dx, dy = x[:, None] - x, y[:, None] - y
    slopes = np.sort(dy[dx > 0] / dx[dx > 0])
    if not slopes.size:
        raise ValueError("a trend needs at least two distinct send times")
    slope = float(np.median(slopes))
    factor = hamed_rao_factor(x, y, slope)
    n, nt = len(y), len(slopes)
    sigma = np.sqrt(max((n * (n - 1) * (2 * n + 5) - _ties(x) - _ties(y)) / 18.0, 0.0) * factor)
    z = stats.norm.ppf((1 - confidence) / 2)
    upper = min(int(np.round((nt - z * sigma) / 2)), nt - 1)
    lower = max(int(np.round((nt + z * sigma) / 2)) - 1, 0)
    return slope, float(slopes[lower]), float(slopes[upper]), factor


def queue_trend(records: Sequence, confidence: float = 0.95) -> QueueTrend:
    """The number in system at each arrival, its corrected trend and what the test reads of it."""
    sent, found = number_in_system(records)
    x, y = _stride(sent - sent[0], found)
    slope, lo, hi, factor = corrected_slope(x, y, confidence)
    intercept = float(np.median(y - slope * x))
    window = float(x[-1])
    spread = float(np.std(y - intercept - slope * x))
    return QueueTrend(float(np.mean(found)), slope, lo, hi, slope * window, intercept, intercept + slope * window,
                      spread, factor, len(found))


def slice_in_flight(records: Sequence, start: float, end: float, slices: int = SLICES) -> list[float]:
    """The time-weighted mean number of these requests in flight in each of `slices` equal slices."""
    edges = np.linspace(start, end, slices + 1)
    return [in_flight_mean(records, float(a), float(b)) or 0.0 for a, b in zip(edges[:-1], edges[1:])]


def steady_state(records: Sequence, slices: int = SLICES, confidence: float = 0.95) -> SteadyState:
    """Judge one point from its measured requests (objects with sent_s, first_token_s, end_s, ok)."""
    done = [r for r in records if getattr(r, "ok", True) and ttft_ms(r) is not None]
    if len(done) < MIN_REQUESTS or len({r.sent_s for r in records}) < 2:
        return SteadyState(TOO_FEW, f"{len(done)} completed requests; a trend needs at least {MIN_REQUESTS}",
                           None, None, [])
    start, end = min(r.sent_s for r in records), max(r.end_s for r in records)
    window = end - start
    by_slice = slice_in_flight(records, start, end, slices)
    ttft = trend([r.sent_s - start for r in done], [ttft_ms(r) for r in done], window, confidence)
    queue = queue_trend(records, confidence)
    beside = (f"TTFT {ttft.level:,.0f} ms, {ttft.rise:+,.0f} ms over the window; "
              f"in flight by slice {', '.join(f'{x:.2f}' for x in by_slice)}")
    if queue.grew():
        return SteadyState(GREW, f"arrivals outpaced completions: {queue_words(queue)}; {beside}: the point is "
                           "over-saturated, outside the SLO whatever its percentiles", ttft, queue, by_slice)
    return SteadyState(STEADY, f"no material growth of the queue over {window:,.1f} s: {queue_words(queue)}, "
                       f"{why_not(queue)}; {beside}", ttft, queue, by_slice)


def queue_words(q: QueueTrend) -> str:
    spread = f", {q.rise / q.spread:.1f} times its spread {q.spread:.2f}" if q.spread > 0 else ""
    return (f"the number in system an arrival found went from {q.first:.1f} to {q.last:.1f} "
            f"(a rise of {q.rise:.1f}{spread}; slope {q.slope_lo:+.3g} to {q.slope_hi:+.3g} per s)")


def why_not(q: QueueTrend) -> str:
    if q.slope_lo <= 0:
        return "its slope's interval reaches zero"
    return f"short of the {needed_rise(q.level, q.spread):.1f} that growth needs"
