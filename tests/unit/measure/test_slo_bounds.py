"""What a sample can prove about an SLO: percentile claims, requests needed, order-statistic
intervals, attainment intervals, and MLPerf LoadGen's early stopping, against figures computed
by hand or published elsewhere."""
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from stackbook.measure.slo_bounds import (
    attainment_claim,
    attainment_interval,
    clopper_pearson_interval,
    count_exceedances,
    mlperf_discarded_highest,
    mlperf_percentile_estimate,
    mlperf_queries_needed,
    mlperf_server_run_passes,
    quantile_claim,
    quantile_interval,
    quantile_interval_ranks,
    requests_needed,
    wilson_interval,
)

QUANTILES = st.sampled_from([0.5, 0.9, 0.95, 0.99])
CONFIDENCES = st.sampled_from([0.9, 0.95, 0.99])


# --- requests needed and the percentile claim ------------------------------------------------

@pytest.mark.parametrize(("q", "confidence", "expected"), [(0.99, 0.95, 299), (0.95, 0.95, 59), (0.99, 0.99, 459)])
def test_requests_needed_with_none_above_the_bound(q, confidence, expected):
    """n = ceil(ln(1 - c) / ln q): ln 0.05 / ln 0.99 = 298.07, ln 0.05 / ln 0.95 = 58.40,
    ln 0.01 / ln 0.99 = 458.21."""
    assert requests_needed(q, confidence) == expected
    assert expected == math.ceil(math.log(1 - confidence) / math.log(q))


def test_the_boundary_of_299():
    """0.99^299 = 0.0495 proves p99 at 95%; 0.99^298 = 0.0500 does not (it is 0.05004)."""
    assert quantile_claim(0.99, 299, 0).verdict == "inside"
    assert quantile_claim(0.99, 299, 0).p_inside == pytest.approx(0.99 ** 299)
    assert quantile_claim(0.99, 298, 0).verdict == "undecided"


def test_each_request_allowed_above_the_bound_costs_more_requests():
    """With one request above the bound p99 at 95% needs 473: P(Binom(473, 0.01) <= 1) <= 0.05."""
    assert requests_needed(0.99, 0.95, 1) == 473
    assert quantile_claim(0.99, 473, 1).verdict == "inside"
    assert quantile_claim(0.99, 472, 1).verdict == "undecided"


def test_too_many_above_the_bound_proves_the_percentile_is_outside():
    """5 of 100 above the p99 bound: P(Binom(100, 0.01) >= 5) = 0.0034, the p99 is above it."""
    claim = quantile_claim(0.99, 100, 5)
    assert claim.verdict == "outside"
    assert claim.p_outside == pytest.approx(0.0034323, abs=1e-6)
    assert quantile_claim(0.99, 100, 2).verdict == "undecided"   # P(>= 2) = 0.264


def test_a_request_exactly_at_the_bound_meets_it():
    assert count_exceedances([100.0, 250.0, 250.0, 251.0], 250.0) == 1


@settings(max_examples=200, deadline=None)
@given(QUANTILES, CONFIDENCES, st.integers(0, 20))
def test_requests_needed_is_the_smallest_proving_sample(q, confidence, k):
    n = requests_needed(q, confidence, k)
    assert quantile_claim(q, n, k, confidence).verdict == "inside"
    assert n == k or quantile_claim(q, n - 1, k, confidence).verdict != "inside"


@settings(max_examples=200, deadline=None)
@given(QUANTILES, st.integers(0, 20))
def test_requests_needed_grows_with_confidence_and_with_exceedances(q, k):
    assert requests_needed(q, 0.9, k) <= requests_needed(q, 0.95, k) <= requests_needed(q, 0.99, k)
    assert requests_needed(q, 0.95, k) < requests_needed(q, 0.95, k + 1)


@settings(max_examples=200, deadline=None)
@given(QUANTILES, st.integers(1, 600), st.data())
def test_more_exceedances_never_help_the_claim(q, n, data):
    """p_inside grows and p_outside falls with the exceedances; 'inside' and 'outside' never
    both hold."""
    k = data.draw(st.integers(0, n - 1))
    a, b = quantile_claim(q, n, k), quantile_claim(q, n, k + 1)
    assert a.p_inside <= b.p_inside and a.p_outside >= b.p_outside
    rank = {"inside": 0, "undecided": 1, "outside": 2}
    assert rank[a.verdict] <= rank[b.verdict]


# --- the order-statistic interval of a percentile -------------------------------------------

@pytest.mark.parametrize(("n", "ranks", "coverage"), [(20, (6, 15), 0.958611), (100, (40, 61), 0.964800)])
def test_median_interval_matches_the_textbook_ranks(n, ranks, coverage):
    """The 95% distribution-free interval of the median: the 6th and 15th of 20 (coverage
    0.9586), the 40th and 61st of 100 (0.9648), as tabled in Conover, Practical Nonparametric
    Statistics, and by the binomial sums directly."""
    lo, hi, cov = quantile_interval_ranks(0.5, n, 0.95)
    assert (lo, hi) == ranks
    assert cov == pytest.approx(coverage, abs=1e-6)


def test_p99_of_100_requests_has_no_upper_bound_and_says_how_many_would():
    """0.99^100 = 0.366 > 0.025: no rank of 100 bounds p99 from above; 0.99^368 = 0.0247 does."""
    interval = quantile_interval(list(range(1, 101)), 0.99)
    assert interval.upper is None and interval.upper_rank == 101
    assert interval.lower == 97
    assert interval.unbounded == "upper side unbounded: 100 requests, at least 368 needed"
    bounded = quantile_interval(list(range(1, 401)), 0.99)
    assert (bounded.lower, bounded.upper, bounded.unbounded) == (392, 400, None)


@settings(max_examples=300, deadline=None)
@given(QUANTILES, CONFIDENCES, st.integers(1, 1500))
def test_order_statistic_interval_covers_at_least_the_confidence_with_each_tail_held(q, confidence, n):
    from scipy import stats
    lo, hi, cov = quantile_interval_ranks(q, n, confidence)
    half = (1 - confidence) / 2
    assert 0 <= lo < hi <= n + 1
    assert cov >= confidence - 1e-12
    if lo >= 1:   # the left tail is held, and the next rank up would break it
        assert stats.binom.cdf(lo - 1, n, q) <= half
        assert lo == n or stats.binom.cdf(lo, n, q) > half
    if hi <= n:
        assert stats.binom.sf(hi - 1, n, q) <= half
        assert hi == 1 or stats.binom.sf(hi - 2, n, q) > half


# --- attainment -------------------------------------------------------------------------------

def test_wilson_and_clopper_pearson_at_64_of_64():
    """Wilson's lower bound at 64 of 64, 95%: 1 / (1 + 1.96^2 / 64) = 0.9434; Clopper-Pearson's:
    0.025^(1/64) = 0.9440."""
    assert wilson_interval(64, 64) == (pytest.approx(1 / (1 + 1.959964 ** 2 / 64), abs=1e-6), 1.0)
    assert wilson_interval(64, 64)[0] == pytest.approx(0.9434, abs=1e-4)
    assert clopper_pearson_interval(64, 64) == (pytest.approx(0.025 ** (1 / 64)), 1.0)


def test_textbook_intervals_at_81_of_263():
    """Newcombe (1998), Statistics in Medicine 17:857, table I, 81/263 at 95%: Wilson
    0.2553 to 0.3662, Clopper-Pearson 0.2527 to 0.3676."""
    lo, hi = wilson_interval(81, 263)
    assert (round(lo, 4), round(hi, 4)) == (0.2553, 0.3662)
    lo, hi = clopper_pearson_interval(81, 263)
    assert (round(lo, 4), round(hi, 4)) == (0.2527, 0.3676)


def test_textbook_intervals_at_15_of_148_and_0_of_20():
    """Newcombe (1998), table I: 15/148 Wilson 0.0624 to 0.1605, exact 0.0578 to 0.1617;
    0/20 Wilson 0 to 0.1611, exact 0 to 0.1684."""
    assert tuple(round(x, 4) for x in wilson_interval(15, 148)) == (0.0624, 0.1605)
    assert tuple(round(x, 4) for x in clopper_pearson_interval(15, 148)) == (0.0578, 0.1617)
    assert tuple(round(x, 4) for x in wilson_interval(0, 20)) == (0.0, 0.1611)
    assert tuple(round(x, 4) for x in clopper_pearson_interval(0, 20)) == (0.0, 0.1684)


def test_attainment_interval_carries_both():
    a = attainment_interval(95, 100)
    assert a.share == 0.95
    assert a.clopper_pearson[0] < a.wilson[0] < 0.95 < a.wilson[1] < a.clopper_pearson[1]


def test_64_of_64_cannot_prove_99_percent_and_299_can():
    claim = attainment_claim(64, 64, 0.99)
    assert claim.verdict == "undecided"
    assert claim.p_proven == pytest.approx(0.99 ** 64)          # 0.526
    assert (claim.requests_to_prove, claim.more_to_prove) == (299, 235)
    assert attainment_claim(299, 299, 0.99).verdict == "proven"
    assert attainment_claim(299, 299, 0.99).more_to_prove is None
    assert attainment_claim(459, 459, 0.99, confidence=0.99).verdict == "proven"


def test_attainment_refuted_and_what_a_miss_costs():
    """90 of 100 against a 99% target: P(Binom(100, 0.99) <= 90) is about 1e-6, refuted. 99 of
    100 is undecided and needs 473 requests in all with that one miss: 373 more, all meeting."""
    assert attainment_claim(90, 100, 0.99).verdict == "refuted"
    claim = attainment_claim(99, 100, 0.99)
    assert claim.verdict == "undecided" and claim.more_to_prove == 373


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 500), st.data(), CONFIDENCES)
def test_intervals_hold_the_share_and_nest_by_confidence(n, data, confidence):
    k = data.draw(st.integers(0, n))
    for interval in (wilson_interval, clopper_pearson_interval):
        lo, hi = interval(k, n, confidence)
        assert 0 <= lo <= k / n <= hi <= 1
        wlo, whi = interval(k, n, 0.999)
        assert wlo <= lo + 1e-12 and hi <= whi + 1e-12


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 500), st.data(), st.sampled_from([0.9, 0.95, 0.99]))
def test_attainment_proven_exactly_when_the_one_sided_exact_bound_clears_the_target(n, data, target):
    """Proven at 95% means the one-sided 95% Clopper-Pearson lower bound (the two-sided 90% one's
    lower end) is at or above the target."""
    k = data.draw(st.integers(0, n))
    lower = clopper_pearson_interval(k, n, 0.90)[0]
    proven = attainment_claim(k, n, target).verdict == "proven"
    if abs(lower - target) > 1e-9:
        assert proven == (lower > target)


# --- MLPerf LoadGen's early stopping ----------------------------------------------------------

def test_mlperf_early_stopping_reproduces_loadgen():
    """MLPerf LoadGen's early stopping (mlcommons/inference, loadgen/early_stopping.cc, applied in
    loadgen/results.cc, PerformanceSummary::EarlyStopping: confidence 0.99, tolerance 0). The
    under-target count h passes when BetaRegularized[p - d, h, 1 + t] < 1 - c, i.e. when at most
    t over-target queries among h + t are rarer than 1 - c. Checked:

    * Server, none over target: 459 queries for p99 (ceil(ln 0.01 / ln 0.99)). LoadGen's own
      summaries print "Processed 21 queries ... Would need to run at least 438 more queries"
      and "Processed 300 queries ... at least 159 more": both 459.
    * SingleStream floor, t = 1 (results.cc prints h_min + 1): "Processed at least 64 queries"
      for p90 in the sample submission log mlcommons/inference
      tools/submission/directory_structure_samples/sample_1/open/NVIDIA/results/Jetson-Thor_TRT/
      llama3.1-8b-edge/SingleStream/performance/run_1/mlperf_log_summary.txt; 662 for p99,
      LoadGen's MultiStream floor ("Processed at least 662 queries" in MultiStream summaries;
      mlcommons/endpoints pull 417 lists 459, 64 and 662 as LoadGen's reference values).
    * The estimate's discard count, t - 1: that log has 10000 queries, "Would discard 929 highest
      latency queries"; other published summaries have 2048 queries at p90 discarding 172, and
      1179125 and 2091550 at p99 discarding 11539 and 20579.
    * With no over-target query, 44 queries for p90 and 152 for p97 (ceil(ln 0.01 / ln p)).
    """
    assert mlperf_queries_needed(0, 0.99) == 459
    assert mlperf_queries_needed(0, 0.90) == 44
    assert mlperf_queries_needed(0, 0.97) == 152
    assert mlperf_queries_needed(1, 0.90) == 64
    assert mlperf_queries_needed(1, 0.99) == 662
    assert not mlperf_server_run_passes(21, 0, 0.99) and 459 - 21 == 438
    assert not mlperf_server_run_passes(300, 0, 0.99) and 459 - 300 == 159
    assert mlperf_server_run_passes(459, 0, 0.99) and not mlperf_server_run_passes(458, 0, 0.99)
    assert mlperf_discarded_highest(10000, 0.90) == 929
    assert mlperf_discarded_highest(2048, 0.90) == 172
    assert mlperf_discarded_highest(1179125, 0.99) == 11539
    assert mlperf_discarded_highest(2091550, 0.99) == 20579


def test_mlperf_estimate_reads_the_value_below_the_discarded():
    latencies = [float(i) for i in range(1, 10001)]
    estimate = mlperf_percentile_estimate(latencies, 0.90)
    assert (estimate.discarded, estimate.rank, estimate.value, estimate.minimum_queries) == (929, 9071, 9071.0, 64)
    short = mlperf_percentile_estimate(latencies[:63], 0.90)
    assert short.value is None and short.minimum_queries == 64


@settings(max_examples=100, deadline=None)
@given(st.sampled_from([0.9, 0.97, 0.99]), st.integers(0, 30))
def test_mlperf_minimum_is_our_rule_at_99_percent(p, t):
    """LoadGen's test is ours at 99% confidence with a strict inequality; away from exact ties
    the two agree."""
    assert mlperf_queries_needed(t, p) == requests_needed(p, 0.99, t)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from([0.9, 0.99]), st.integers(700, 20000))
def test_mlperf_discards_grow_with_the_sample(p, n):
    assert mlperf_discarded_highest(n, p) <= mlperf_discarded_highest(n + 50, p)
