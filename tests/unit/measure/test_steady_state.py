"""A point's steady state from its records: a queue that grows under an open loop past capacity
(TTFT and requests in flight rising over the window) is named over-saturated; a steady point
with noisy latencies is not; too few requests say so instead of guessing."""
from dataclasses import dataclass

import numpy as np
from stackbook.measure.steady_state import GREW, STEADY, TOO_FEW, slice_in_flight, steady_state


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


def test_an_overloaded_queue_is_named():
    # 12 req/s into a server that does 10: each request waits 1/60 s longer than the one before.
    s = steady_state(open_loop(rate=12, service_s=0.1, n=120))
    assert s.verdict == GREW and "over-saturated" in s.reason
    assert s.ttft.slope_lo > 0 and s.ttft.rise > 1000  # over 10 s of sends, the wait grew by more than a second
    assert s.in_flight_by_slice[-1] > s.in_flight_by_slice[0]


def test_a_steady_point_with_noisy_latencies_is_steady():
    for seed in range(10):
        s = steady_state(open_loop(rate=5, service_s=0.1, n=120, seed=seed, jitter=0.3))
        assert s.verdict == STEADY, (seed, s.reason)


def test_too_few_requests_say_so():
    s = steady_state(open_loop(rate=12, service_s=0.1, n=8))
    assert s.verdict == TOO_FEW and s.ttft is None and "at least 12" in s.reason


def test_slices_hold_the_time_weighted_requests_in_flight():
    recs = [Rec(0.0, 0.1, 2.0), Rec(1.0, 1.1, 2.0)]  # one in flight over [0, 1), two over [1, 2]
    assert slice_in_flight(recs, 0.0, 2.0, slices=2) == [1.0, 2.0]


def test_the_summary_is_plain_data():
    d = steady_state(open_loop(rate=12, service_s=0.1, n=60)).as_dict()
    assert d["verdict"] == GREW and d["slices"] == 4 and set(d["ttft_trend"]) == {
        "level", "slope_per_s", "slope_lo", "slope_hi", "rise"}


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
