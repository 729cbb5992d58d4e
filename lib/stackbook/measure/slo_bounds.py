"""What a sample of requests can prove about an SLO, without assuming a latency distribution.

A percentile read off a sample is an estimate; whether "p99 <= 500 ms" holds is a claim about the
population the requests came from. Each request either exceeds a bound or meets it, so the count
of exceedances is binomial whatever shape the latencies have, and that count alone decides the
claim. The same arithmetic covers attainment (the share of requests meeting every SLO bound):
"p99 of TTFT <= X" and "at least 99% of requests have TTFT <= X" are one statement.

Every function here is pure: counts, ranks and sorted values in, numbers and verdicts out.
Verdict words: 'inside' (the claim is proven at the confidence), 'outside' (its opposite is
proven), 'undecided' (the sample can carry neither).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from scipy import stats

INSIDE, OUTSIDE, UNDECIDED = "inside", "outside", "undecided"


def _check_fraction(name: str, x: float) -> None:
    if not 0.0 < x < 1.0:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {x}")


def _check_counts(n: int, k: int, what: str) -> None:
    if n < 0 or not 0 <= k <= n:
        raise ValueError(f"{what} must lie between 0 and the {n} requests, got {k}")


def count_exceedances(latencies: Sequence[float], bound: float) -> int:
    """Requests strictly above the bound: a request exactly at the bound meets it."""
    return sum(1 for x in latencies if x > bound)


# --- a percentile against a bound ------------------------------------------------------------

class QuantileClaim(NamedTuple):
    """The verdict on "the q-quantile is <= bound" from n requests, k of them above the bound.

    p_inside: P(Binom(n, 1-q) <= k), the chance of so few exceedances were the quantile above the
    bound; p_outside: P(Binom(n, 1-q) >= k), the chance of so many were it at or below. A claim is
    proven when its p-value is at most 1 - confidence."""
    verdict: str
    quantile: float
    confidence: float
    requests: int
    exceedances: int
    p_inside: float
    p_outside: float


def quantile_claim(quantile: float, requests: int, exceedances: int, confidence: float = 0.95) -> QuantileClaim:
    """'inside' when the sample proves the q-quantile <= the bound, 'outside' when it proves the
    q-quantile > the bound, else 'undecided'. One-sided exact binomial tests, distribution-free:
    if the true exceedance rate were above 1 - q, k or fewer exceedances would be rarer than
    1 - confidence (and symmetrically for 'outside')."""
    _check_fraction("quantile", quantile)
    _check_fraction("confidence", confidence)
    _check_counts(requests, exceedances, "exceedances")
    alpha = 1.0 - confidence
    tail = 1.0 - quantile
    p_inside = float(stats.binom.cdf(exceedances, requests, tail))
    p_outside = float(stats.binom.sf(exceedances - 1, requests, tail))
    verdict = INSIDE if p_inside <= alpha else OUTSIDE if p_outside <= alpha else UNDECIDED
    return QuantileClaim(verdict, quantile, confidence, requests, exceedances, p_inside, p_outside)


def _smallest_n(predicate, start: int) -> int:
    """The smallest n >= start for which a predicate, false then true as n grows, holds."""
    lo, hi = start, max(start, 1)
    while not predicate(hi):
        lo, hi = hi + 1, hi * 2
    while lo < hi:
        mid = (lo + hi) // 2
        if predicate(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def requests_needed(quantile: float, confidence: float = 0.95, exceedances: int = 0) -> int:
    """The fewest requests with which a sample having at most `exceedances` above the bound
    proves the q-quantile <= the bound: p99 at 95% needs 299 with none above (0.99^299 <= 0.05),
    p95 at 95% needs 59, p99 at 99% needs 459. Each request allowed above adds roughly 1/(1-q)."""
    _check_fraction("quantile", quantile)
    _check_fraction("confidence", confidence)
    if exceedances < 0:
        raise ValueError(f"exceedances must be >= 0, got {exceedances}")
    alpha = 1.0 - confidence
    return _smallest_n(lambda n: stats.binom.cdf(exceedances, n, 1.0 - quantile) <= alpha,
                       max(exceedances, 1))


# --- an interval on a percentile by order statistics -----------------------------------------

class QuantileInterval(NamedTuple):
    """A two-sided interval of the q-quantile from the sample's own values: the lower_rank-th and
    upper_rank-th smallest (1-based). A side the sample is too small to bound is None, its rank
    0 or n + 1, and `unbounded` says which and how many requests would bound it. coverage is the
    interval's exact binomial coverage, at least the confidence asked."""
    quantile: float
    confidence: float
    requests: int
    lower: float | None
    upper: float | None
    lower_rank: int
    upper_rank: int
    coverage: float
    unbounded: str | None


def quantile_interval_ranks(quantile: float, requests: int, confidence: float = 0.95) -> tuple[int, int, float]:
    """The ranks (l, u) of an equal-tailed order-statistic interval and its exact coverage.

    With B ~ Binom(n, q) the number of observations below the true q-quantile, the interval
    [X(l), X(u)] misses it on the left with probability P(B < l) and on the right with
    P(B >= u). Each tail is held to (1 - confidence) / 2; a side no rank can hold is 0 or n + 1.
    """
    _check_fraction("quantile", quantile)
    _check_fraction("confidence", confidence)
    n, half = requests, (1.0 - confidence) / 2.0
    cdf = lambda j: float(stats.binom.cdf(j, n, quantile))  # noqa: E731 - local shorthand
    lower = 0    # the largest l >= 1 with P(B <= l - 1) <= half, or 0 when none
    j = int(stats.binom.ppf(half, n, quantile)) if n else 0
    for cand in (j + 1, j, j - 1):
        if 1 <= cand <= n and cdf(cand - 1) <= half:
            lower = cand
            break
    upper = n + 1   # the smallest u <= n with P(B >= u) = 1 - cdf(u - 1) <= half, or n + 1
    j = int(stats.binom.isf(half, n, quantile)) if n else 0
    for cand in (j - 1, j, j + 1, j + 2):
        if 1 <= cand <= n and float(stats.binom.sf(cand - 1, n, quantile)) <= half:
            upper = cand
            break
    coverage = cdf(upper - 1) - (cdf(lower - 1) if lower >= 1 else 0.0)
    return lower, upper, coverage


def quantile_interval(sorted_values: Sequence[float], quantile: float, confidence: float = 0.95) -> QuantileInterval:
    """The distribution-free confidence interval of the q-quantile, from sorted sample values.
    Exact for any continuous distribution, and conservative: ranks are whole numbers, so coverage
    lands at or above the confidence, never below."""
    n = len(sorted_values)
    lo, hi, coverage = quantile_interval_ranks(quantile, n, confidence)
    half = (1.0 - confidence) / 2.0
    missing = []
    if lo == 0:
        need = math.ceil(math.log(half) / math.log(1.0 - quantile) - 1e-9)
        missing.append(f"lower side unbounded: {n} requests, at least {need} needed")
    if hi == n + 1:
        need = math.ceil(math.log(half) / math.log(quantile) - 1e-9)
        missing.append(f"upper side unbounded: {n} requests, at least {need} needed")
    return QuantileInterval(
        quantile, confidence, n,
        sorted_values[lo - 1] if lo >= 1 else None,
        sorted_values[hi - 1] if hi <= n else None,
        lo, hi, coverage, "; ".join(missing) or None)


# --- attainment: the share of requests meeting every bound -----------------------------------

class AttainmentInterval(NamedTuple):
    """The observed share of requests meeting every SLO bound with two two-sided intervals:
    Clopper-Pearson (exact, conservative: coverage never below the confidence) and Wilson
    (coverage near the confidence on average, tighter, can dip below it at small n)."""
    met: int
    requests: int
    share: float
    confidence: float
    clopper_pearson: tuple[float, float]
    wilson: tuple[float, float]


def clopper_pearson_interval(met: int, requests: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact binomial interval: the proportions whose one-sided tails at the observed count
    are each (1 - confidence) / 2, read from the beta distribution."""
    _check_fraction("confidence", confidence)
    _check_counts(requests, met, "met")
    if requests == 0:
        return 0.0, 1.0
    half = (1.0 - confidence) / 2.0
    low = 0.0 if met == 0 else float(stats.beta.ppf(half, met, requests - met + 1))
    high = 1.0 if met == requests else float(stats.beta.ppf(1.0 - half, met + 1, requests - met))
    return low, high


def wilson_interval(met: int, requests: int, confidence: float = 0.95) -> tuple[float, float]:
    """The score interval: the proportions p whose normal test of the observed share is not
    rejected. Unlike the share +- z·se it never collapses to a point at 0 of n or n of n."""
    _check_fraction("confidence", confidence)
    _check_counts(requests, met, "met")
    if requests == 0:
        return 0.0, 1.0
    z = float(stats.norm.ppf(1.0 - (1.0 - confidence) / 2.0))
    n, p = requests, met / requests
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if met == 0 else max(0.0, centre - half)      # exact ends, free of rounding
    high = 1.0 if met == requests else min(1.0, centre + half)
    return low, high


def attainment_interval(met: int, requests: int, confidence: float = 0.95) -> AttainmentInterval:
    """The share of requests meeting every bound, with its Clopper-Pearson and Wilson intervals."""
    _check_counts(requests, met, "met")
    share = met / requests if requests else float("nan")
    return AttainmentInterval(met, requests, share, confidence,
                              clopper_pearson_interval(met, requests, confidence),
                              wilson_interval(met, requests, confidence))


class AttainmentClaim(NamedTuple):
    """The verdict on "attainment >= target": 'proven', 'refuted' or 'undecided', with the
    one-sided p-values that decide it, and the requests that would prove it: `requests_to_prove`
    with none missing the SLO, `more_to_prove` further requests, all meeting it, on top of this
    sample (None when no number of added requests can, i.e. it is already proven)."""
    verdict: str
    target: float
    confidence: float
    met: int
    requests: int
    p_proven: float
    p_refuted: float
    requests_to_prove: int
    more_to_prove: int | None


PROVEN, REFUTED = "proven", "refuted"


def attainment_claim(met: int, requests: int, target: float, confidence: float = 0.95) -> AttainmentClaim:
    """Whether "at least `target` of requests meet every bound" is proven, refuted or undecided.
    It is the percentile claim read the other way (the requests missing the SLO are the
    exceedances, the target the quantile), so 64 of 64 cannot prove 99% at 95% confidence
    (0.99^64 = 0.53): 299 of 299 can."""
    _check_counts(requests, met, "met")
    missed = requests - met
    claim = quantile_claim(target, requests, missed, confidence)
    verdict = {INSIDE: PROVEN, OUTSIDE: REFUTED}.get(claim.verdict, UNDECIDED)
    needed_with_these_misses = requests_needed(target, confidence, missed)
    more = None if verdict == PROVEN else max(needed_with_these_misses - requests, 0)
    return AttainmentClaim(verdict, target, confidence, met, requests, claim.p_inside, claim.p_outside,
                           requests_needed(target, confidence, 0), more)


# --- MLPerf LoadGen's early stopping ---------------------------------------------------------
# LoadGen (mlcommons/inference, loadgen/early_stopping.cc and results.cc) applies the same
# one-sided binomial test at 99% confidence: with t queries over the latency target, a run
# passes once its under-target count h satisfies P(Binom(h + t, 1 - (p - d)) <= t) < 1 - c,
# where p is the target percentile and d a tolerance (0 in LoadGen). Below, that rule in terms
# of total queries.

MLPERF_CONFIDENCE = 0.99


def _mlperf_passes(total: int, overlatency: int, percentile: float, confidence: float, tolerance: float) -> bool:
    """LoadGen's test, strict as it is written: the chance of at most t over-target queries among
    `total`, were each over target with probability 1 - (p - d), below 1 - c."""
    under = total - overlatency
    if under <= 0:
        return False
    over_rate = 1.0 - (percentile - tolerance)
    return stats.binom.cdf(overlatency, total, over_rate) < 1.0 - confidence


def mlperf_queries_needed(overlatency: int, percentile: float, confidence: float = MLPERF_CONFIDENCE,
                          tolerance: float = 0.0) -> int:
    """The fewest queries (under-target plus the t over it) with which a run having t over-target
    queries passes LoadGen's early stopping: 459 for p99 with none over, 64 for p90 with one over
    (LoadGen's SingleStream floor), 662 for p99 with one over."""
    _check_fraction("percentile", percentile)
    if overlatency < 0:
        raise ValueError(f"overlatency must be >= 0, got {overlatency}")
    return _smallest_n(lambda n: _mlperf_passes(n, overlatency, percentile, confidence, tolerance),
                       overlatency + 1)


def mlperf_server_run_passes(queries: int, overlatency: int, percentile: float,
                             confidence: float = MLPERF_CONFIDENCE, tolerance: float = 0.0) -> bool:
    """LoadGen's Server scenario: the run passes when it issued at least the queries its count of
    over-target queries needs (21 queries with none over fall 438 short of 459)."""
    return queries >= mlperf_queries_needed(overlatency, percentile, confidence, tolerance)


class MlperfPercentileEstimate(NamedTuple):
    """LoadGen's early-stopping percentile estimate: the value `discarded` places from the top
    of the sorted sample (rank requests - discarded, 1-based), an upper confidence bound on the
    percentile; `minimum_queries` is the floor below which it gives none (value None)."""
    value: float | None
    rank: int | None
    discarded: int | None
    minimum_queries: int


def mlperf_discarded_highest(queries: int, percentile: float, confidence: float = MLPERF_CONFIDENCE,
                             tolerance: float = 0.0) -> int | None:
    """How many of the highest latencies LoadGen's SingleStream/MultiStream estimate sets aside:
    t - 1, where t is the largest over-target count (at least 1) that `queries` would still pass
    with. None below the floor, mlperf_queries_needed(1, ...)."""
    if queries < mlperf_queries_needed(1, percentile, confidence, tolerance):
        return None
    over_rate = 1.0 - (percentile - tolerance)
    alpha = 1.0 - confidence
    # The first i >= 2 that `queries` no longer passes with is the smallest i whose binomial
    # CDF reaches alpha; ppf lands on it or next to it, and the exact CDF settles which.
    i = max(2, int(stats.binom.ppf(alpha, queries, over_rate)) - 1)
    while _mlperf_passes(queries, i, percentile, confidence, tolerance):
        i += 1
    while i > 2 and not _mlperf_passes(queries, i - 1, percentile, confidence, tolerance):
        i -= 1
    return (i - 1) - 1


def mlperf_percentile_estimate(sorted_latencies: Sequence[float], percentile: float,
                               confidence: float = MLPERF_CONFIDENCE,
                               tolerance: float = 0.0) -> MlperfPercentileEstimate:
    """LoadGen's early-stopping estimate of a percentile from the sorted latencies of a run."""
    n = len(sorted_latencies)
    floor = mlperf_queries_needed(1, percentile, confidence, tolerance)
    discarded = mlperf_discarded_highest(n, percentile, confidence, tolerance)
    if discarded is None:
        return MlperfPercentileEstimate(None, None, None, floor)
    rank = n - discarded
    return MlperfPercentileEstimate(sorted_latencies[rank - 1], rank, discarded, floor)
