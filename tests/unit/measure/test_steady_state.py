"""A point's steady state from its records: a queue that grows under an open loop past capacity
(the number in system rising over the window) is named over-saturated; a steady point with noisy
latencies, or a TTFT that rises while the queue does not, is not; too few requests say so
instead of guessing. Rates on seeded Poisson schedules are bounded here; the full table is
benchmarks/steady_state_power.py."""
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from stackbook.loadgen.phases import Phase
from stackbook.loadgen.records import read_records
from stackbook.locations import REPO_ROOT
from stackbook.measure.steady_state import (
    GREW,
    STEADY,
    TOO_FEW,
    corrected_slope,
    hamed_rao_factor,
    number_in_system,
    slice_in_flight,
    steady_state,
)

# the points of known-effect's first committed run (AVX-512 EPYC, bf16) the TTFT trend had flagged
KNOWN_EFFECT = REPO_ROOT / "tests" / "fixtures" / "known_effect_bf16_avx512"


@dataclass
class Rec:
    sent_s: float
    first_token_s: float
    end_s: float
    ok: bool = True


def open_loop(rate: float, service_s: float, n: int, servers: int = 1, seed: int = 0, jitter: float = 0.1):
    """Requests at a fixed rate into `servers` FIFO servers: past capacity the queue grows."""
    rng = np.random.default_rng(seed)
    free = [0.0] * servers
    out = []
    for i in range(n):
        sent = i / rate
        k = int(np.argmin(free))
        begin = max(sent, free[k])
        s = service_s * (1 + jitter * rng.standard_normal())
        free[k] = begin + s
        out.append(Rec(sent, begin + 0.2 * s, begin + s))
    return out


def poisson_point(utilisation: float, measured: int, seed: int, warmup: int = 2):
    """A sweep point on one FIFO server with exponential service (mean 1 s), from empty: Poisson
    sends, the protocol's default warm-up before the measured requests, only those returned."""
    rng = np.random.default_rng(seed)
    total = warmup + measured
    sent = np.cumsum(rng.exponential(1 / utilisation, total))
    service = rng.exponential(1.0, total)
    free, out = 0.0, []
    for t, s in zip(sent, service):
        begin = max(t, free)
        free = begin + s
        out.append(Rec(float(t), float(begin + 0.1 * s), float(free)))
    return out[warmup:]


def test_an_overloaded_queue_is_named():
    # 12 req/s into a server that does 10: one arrival in six stays, 20 over 120 requests.
    s = steady_state(open_loop(rate=12, service_s=0.1, n=120))
    assert s.verdict == GREW and "over-saturated" in s.reason and "arrivals outpaced completions" in s.reason
    assert s.in_flight.slope_lo > 0 and 15 < s.in_flight.rise < 25
    assert s.in_flight.last - s.in_flight.first == pytest.approx(s.in_flight.rise)
    assert s.ttft.rise > 1000  # the wait grew by more than a second: reported beside the test
    assert s.in_flight_by_slice[-1] > s.in_flight_by_slice[0]


def test_a_steady_point_with_noisy_latencies_is_steady():
    for seed in range(10):
        s = steady_state(open_loop(rate=5, service_s=0.1, n=120, seed=seed, jitter=0.3))
        assert s.verdict == STEADY, (seed, s.reason)


def test_a_seeded_poisson_schedule_at_half_utilisation_is_seldom_flagged():
    """200 seeded 40-request points at utilisation 0.5 (exponential service, the hard case): the
    simulated false-alarm rate is 0.1% (benchmark, 2000 points); this bound is 5%, 10 of 200."""
    flagged = sum(steady_state(poisson_point(0.5, 40, seed)).verdict == GREW for seed in range(200))
    assert flagged <= 10


def test_a_queue_past_capacity_is_flagged():
    """At twice capacity a 120-request window grows the queue by about 60: every seeded point is
    flagged. At 1.5 times it grows by about 40: the benchmark flags 93%; the bound is 85%."""
    assert all(steady_state(poisson_point(2.0, 120, seed)).verdict == GREW for seed in range(20))
    assert sum(steady_state(poisson_point(1.5, 120, seed)).verdict == GREW for seed in range(40)) >= 34


def test_a_rising_ttft_alone_is_not_growth():
    """One request a second, each gone in half a second, its TTFT rising from 100 to 400 ms: the
    system never holds more than the one request, so the queue did not grow."""
    recs = [Rec(i * 1.0, i * 1.0 + 0.1 + 0.3 * i / 39, i * 1.0 + 0.5) for i in range(40)]
    s = steady_state(recs)
    assert s.ttft.slope_lo > 0 and s.ttft.rise > 250
    assert s.verdict == STEADY and s.in_flight.rise == 0 and "TTFT 2" in s.reason


@pytest.mark.parametrize("arm,point", [("fast", "rate0.4-r0"), ("fast-again", "rate0.8-r1"), ("slow", "rate0.4-r1")])
def test_the_first_known_effect_runs_flagged_points_are_steady(arm, point):
    """The known-effect points the TTFT trend called over-saturated (every request inside the
    SLO, the engine about half busy) hold no growing queue: an arrival mostly found it empty."""
    recs = [r for r in read_records(Path(KNOWN_EFFECT / f"{arm}-{point}.jsonl")) if r.phase == Phase.MEASURE]
    assert len(recs) == 40
    s = steady_state(recs)
    assert s.verdict == STEADY, s.reason
    assert s.in_flight.rise < 1 and s.in_flight.level < 1


def test_too_few_requests_say_so():
    s = steady_state(open_loop(rate=12, service_s=0.1, n=8))
    assert s.verdict == TOO_FEW and s.ttft is None and s.in_flight is None and "at least 12" in s.reason


def test_the_number_in_system_is_what_each_arrival_found():
    recs = [Rec(0.0, 0.1, 2.0), Rec(1.0, 1.1, 3.0), Rec(2.5, 2.6, 4.0), Rec(3.5, 3.6, 3.6)]
    sent, found = number_in_system(recs)
    assert list(sent) == [0.0, 1.0, 2.5, 3.5]
    assert list(found) == [0, 1, 1, 1]  # at 2.5 the first had ended; at 3.5 only the third is left


def test_slices_hold_the_time_weighted_requests_in_flight():
    recs = [Rec(0.0, 0.1, 2.0), Rec(1.0, 1.1, 2.0)]  # one in flight over [0, 1), two over [1, 2]
    assert slice_in_flight(recs, 0.0, 2.0, slices=2) == [1.0, 2.0]


def test_the_interval_is_sens_for_independent_points_and_wider_for_a_wandering_count():
    rng = np.random.default_rng(3)
    x = np.arange(200.0)
    noise = rng.normal(0, 1, 200)
    slope, lo, hi, factor = corrected_slope(x, 0.01 * x + noise)
    scipy = stats.theilslopes(0.01 * x + noise, x, alpha=0.95)
    assert factor < 1.3 and slope == pytest.approx(scipy.slope)
    if factor == 1.0:
        assert (lo, hi) == pytest.approx((scipy.low_slope, scipy.high_slope))
    walk = np.cumsum(rng.normal(0, 1, 200))  # a count that wanders: neighbours alike
    _, lo_w, hi_w, factor_w = corrected_slope(x, walk)
    plain = stats.theilslopes(walk, x, alpha=0.95)
    assert factor_w > 3 and hamed_rao_factor(x, walk, plain.slope) == factor_w
    assert (hi_w - lo_w) > 1.5 * (plain.high_slope - plain.low_slope)


def test_the_summary_is_plain_data():
    d = steady_state(open_loop(rate=12, service_s=0.1, n=60)).as_dict()
    assert d["verdict"] == GREW and d["slices"] == 4 and set(d["ttft_trend"]) == {
        "level", "slope_per_s", "slope_lo", "slope_hi", "rise"}
    assert set(d["in_flight_trend"]) == {"level", "slope_per_s", "slope_lo", "slope_hi", "rise", "first", "last",
                                         "spread", "variance_factor", "arrivals"}
    assert d["in_flight_trend"]["arrivals"] == 60


def test_a_long_series_is_fitted_on_a_stride_and_its_interval_is_no_narrower():
    from stackbook.measure.steady_state import TREND_SAMPLE, trend
    rng = np.random.default_rng(1)
    x = np.arange(3 * TREND_SAMPLE) / 100.0
    y = 50 + 2.0 * x + rng.normal(0, 5, len(x))
    whole = trend(x[: TREND_SAMPLE], y[: TREND_SAMPLE], window_s=1)  # fitted whole, at the limit
    long = trend(x, y, window_s=float(x[-1]))
    assert abs(long.slope_per_s - 2.0) < 0.05 and long.slope_lo < 2.0 < long.slope_hi
    assert long.level == float(np.median(y))  # the level is read from every point, not the stride
    # a stride of TREND_SAMPLE points over 3x the span: the slope's interval is that of TREND_SAMPLE points
    assert (long.slope_hi - long.slope_lo) > (whole.slope_hi - whole.slope_lo) / 3 / 1.5
