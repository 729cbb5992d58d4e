"""The capacity search: it lands on the simulated knee's true capacity, states an interval whose
ends were each proven by a probe, re-probes or stops on an undecided load, and stops on its
budgets saying which; the ladder at the same resolution brackets the same capacity."""
import pytest

from stackbook.capacity.ladder import ladder_loads, run_ladder
from stackbook.capacity.probing import SearchPlan
from stackbook.capacity.search import search_capacity
from stackbook.capacity.simulated import KneeProbe
from stackbook.capacity.verdict import ProbeVerdict, attainment_verdict
from stackbook.measure.slo_bounds import wilson_interval
from stackbook.harness.knee_scheduler import Knee, Lengths, SloBounds
from stackbook.harness.knee_truth import true_capacity


class Threshold:
    """A probe with a known answer: inside up to `capacity`, outside above it, undecided on the
    loads in `grey` whatever the requests (or below `decided_at` requests), each lasting `seconds`."""

    def __init__(self, capacity, grey=(), decided_at=0, seconds=1.0):
        self.capacity, self.grey, self.decided_at, self.seconds = capacity, set(grey), decided_at, seconds
        self.calls = []

    def __call__(self, load, requests):
        self.calls.append((load, requests))
        if load in self.grey or requests < self.decided_at:
            verdict = "undecided"
        else:
            verdict = "inside" if load <= self.capacity else "outside"
        return ProbeVerdict(load, verdict, f"{verdict} by construction", requests, self.seconds)


def test_wilson_interval_and_the_attainment_rule():
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.27753), abs=1e-5)
    assert wilson_interval(50, 100) == pytest.approx((0.40383, 0.59617), abs=1e-5)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert attainment_verdict(30, 200, 200, 0.95).verdict == "inside"     # lower bound 0.981
    assert attainment_verdict(30, 180, 200, 0.95).verdict == "outside"    # upper bound 0.934
    v = attainment_verdict(30, 194, 200, 0.95, duration_s=12.5)           # [0.936, 0.986]
    assert (v.verdict, v.met, v.requests, v.duration_s) == ("undecided", 194, 200, 12.5)
    assert "194/200" in v.reason and "0.936" in v.reason
    with pytest.raises(ValueError):
        attainment_verdict(1, 5, 10, 1.0)


def test_expand_then_bisect_brackets_an_integer_capacity_to_one():
    probe = Threshold(37)
    r = search_capacity(probe, SearchPlan(start=1, tolerance=1, max_load=1024))
    assert (r.lower, r.upper, r.resolved) == (37, 38, True)
    assert [load for load, _ in probe.calls] == [1, 2, 4, 8, 16, 32, 64, 48, 40, 36, 38, 37]
    assert r.stop_reason.startswith("resolved: inside at 37, outside at 38")
    assert r.holds(37) and not r.holds(38) and not r.holds(36)
    assert len(r.probes) == 12 and r.duration_s == 12.0 and r.requests == 12 * 200
    # Every probe at or below the lower end says inside, every one at or above the upper end outside.
    assert all(p.verdict == "inside" for p in r.probes if p.load <= r.lower)
    assert all(p.verdict == "outside" for p in r.probes if p.load >= r.upper)


def test_a_rate_is_bracketed_to_a_relative_tolerance():
    probe = Threshold(123.4)
    r = search_capacity(probe, SearchPlan(start=10, tolerance=0.1, integer=False, min_load=0.5, max_load=10_000))
    assert r.resolved and r.lower <= 123.4 < r.upper and r.upper / r.lower <= 1.1
    assert r.upper / r.lower > 1.01  # it stops at the tolerance, not below it


def test_a_start_above_the_capacity_halves_down_and_limits_are_reported():
    probe = Threshold(5)
    r = search_capacity(probe, SearchPlan(start=64, tolerance=1, max_load=256))
    assert (r.lower, r.upper) == (5, 6) and [c for c, _ in probe.calls][:5] == [64, 32, 16, 8, 4]
    high = search_capacity(Threshold(10_000), SearchPlan(start=8, tolerance=1, max_load=100))
    assert (high.lower, high.upper, high.resolved) == (100, None, False)
    assert "largest load allowed, 100" in high.stop_reason and high.holds(10_000)
    low = search_capacity(Threshold(0), SearchPlan(start=8, tolerance=1, min_load=1, max_load=100))
    assert (low.lower, low.upper) == (None, 1) and "smallest load allowed, 1" in low.stop_reason


def test_an_undecided_load_is_reprobed_with_twice_the_requests_up_to_the_budget():
    probe = Threshold(37, decided_at=800)
    r = search_capacity(probe, SearchPlan(start=32, tolerance=1, requests=200, max_requests=800))
    assert probe.calls[:3] == [(32, 200), (32, 400), (32, 800)]
    assert (r.lower, r.upper, r.resolved) == (37, 38, True)
    stop = search_capacity(Threshold(37, decided_at=800), SearchPlan(start=32, on_undecided="stop"))
    assert (stop.lower, stop.upper, stop.resolved, len(stop.probes)) == (None, None, False, 1)
    assert stop.stop_reason.startswith("undecided at 32, not re-probed")


def test_grey_loads_are_bisected_around_and_named_when_nothing_is_left():
    probe = Threshold(37, grey={38, 39})
    r = search_capacity(probe, SearchPlan(start=32, tolerance=1, requests=200, max_requests=400))
    assert (r.lower, r.upper, r.resolved, r.undecided) == (37, 40, False, (38, 39))
    assert r.stop_reason.startswith("undecided: every load tried between 37 (inside) and 40 (outside)")
    assert r.holds(37) and r.holds(39)
    wide = search_capacity(Threshold(37, grey={38, 39}), SearchPlan(start=32, tolerance=3, max_requests=400))
    assert (wide.lower, wide.upper, wide.resolved) == (37, 40, True)


def test_budgets_stop_the_search_with_their_reason():
    r = search_capacity(Threshold(37), SearchPlan(start=1, max_probes=3))
    assert len(r.probes) == 3 and (r.lower, r.upper) == (4, None) and not r.resolved
    assert r.stop_reason == "probe budget spent: 3 of 3 probes"
    t = search_capacity(Threshold(37, seconds=10.0), SearchPlan(start=1, max_wall_s=25))
    assert len(t.probes) == 3 and t.stop_reason == "time budget spent: 30.0 s of 25.0 s"
    with pytest.raises(ValueError, match="whole tolerance"):
        SearchPlan(tolerance=0.5)
    with pytest.raises(ValueError, match="min_load"):
        SearchPlan(start=0)


def test_the_ladder_brackets_the_same_capacity_with_more_probes():
    plan = SearchPlan(start=4, tolerance=4, max_load=64)
    assert ladder_loads(plan) == [4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60, 64]
    full = run_ladder(Threshold(37), plan)
    early = run_ladder(Threshold(37), plan, stop_at_first_outside=True)
    search = search_capacity(Threshold(37), plan)
    for r in (full, early, search):
        assert (r.lower, r.upper, r.resolved) == (36, 40, True)
    assert (len(full.probes), len(early.probes)) == (16, 10)
    assert [p.load for p in search.probes] == [4, 8, 16, 32, 64, 48, 40, 36]
    assert early.stop_reason == "stopped at the first rung outside, 40"
    rates = ladder_loads(SearchPlan(start=10, tolerance=0.5, integer=False, max_load=40))
    assert rates == pytest.approx([10, 15, 22.5, 33.75])


KNEE = Knee(max_batch=16, t0_ms=10, t1_ms=0.5)
LENGTHS = Lengths(32, 0.5)
SLO = SloBounds(ttft_s=0.15, tpot_s=0.02)


def test_on_the_simulated_knee_the_search_lands_on_the_true_capacity():
    truth = true_capacity(KNEE, SLO, 0.95, LENGTHS)
    assert truth.capacity == 17
    plan = SearchPlan(start=2, tolerance=2, max_load=64, requests=200, max_requests=800)
    for seed in range(5):
        r = search_capacity(KneeProbe(KNEE, SLO, 0.95, LENGTHS, seed), plan)
        assert r.resolved and r.holds(truth.capacity), (seed, r.lower, r.upper, r.stop_reason)
        assert r.upper - r.lower <= 2 and len(r.probes) <= 10
        ladder = run_ladder(KneeProbe(KNEE, SLO, 0.95, LENGTHS, seed), plan)
        assert len(r.probes) < len(ladder.probes) and r.duration_s < ladder.duration_s


def test_a_knee_probe_is_seeded_and_refuses_fractional_concurrency():
    a = [KneeProbe(KNEE, SLO, 0.95, LENGTHS, seed=3)(18, 200) for _ in range(2)]
    assert a[0] == a[1] and a[0].requests == 200 and a[0].duration_s > 0
    probe = KneeProbe(KNEE, SLO, 0.95, LENGTHS, seed=3)
    assert probe(18, 200) != probe(18, 200)  # each call draws its own lengths
    with pytest.raises(ValueError, match="whole number"):
        probe(2.5, 200)
