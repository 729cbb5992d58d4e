"""The preregistered decision rule: an interval over repetitions for every compared figure, and a
three-way verdict on each difference between two arms.

Why a t-interval over repetition estimates: each repetition is one whole run of the point (its own
engine start), so the spread of its estimates across repetitions carries both the sampling error
inside a run and the run-to-run drift of a shared machine. With few repetitions Student's t keeps
the interval honestly wide, where a bootstrap over two or three repetitions would report no wider
than their range. Figures are taken on the log scale (a relative spread, intervals never below
zero) and the spread is pooled over the loads of one run that share it (analysis.spread_pool: a
load whose spread the others do not support is set apart and keeps its own): the same machine and
engines, so two repetitions at each of three loads give three degrees of freedom instead of one. A difference
between two arms is a ratio, so "12% ahead" reads the same whichever arm is named first: paired
by round where both arms ran the same repetitions (the interleaved design; drift a round shares
cancels), else Welch's interval (unequal variances).

The rule (`protocol.decision`): a difference counts only when its whole interval lies beyond the
`min_effect` margin; it is "no difference" when the whole interval lies inside the margin; any
other interval is "undecided" and asks for more repetitions. Under sequential stopping the
interval's level is adjusted for the number of looks (Bonferroni), so the error rate across the
looks stays at 1 - confidence.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats

from stackbook.analysis.rounds_needed import df_per_round, undecided_words
from stackbook.analysis.spread_pool import plan_spread
from stackbook.measure.metric_definitions import Figure, compared_figures

AHEAD, NO_DIFFERENCE, UNDECIDED = "ahead", "no difference", "undecided"


Compared = Figure  # one figure the verdict compares (measure.metric_definitions)
COMPARED = compared_figures()
COMPARED_BY_NAME = {c.name: c for c in COMPARED}


def min_sample(percentile: float) -> int:
    """The fewest requests that put at least one observation above the percentile: p50 2, p95 20,
    p99 100. Below it the "percentile" is the sample's maximum."""
    return math.ceil(100 / (100 - percentile) - 1e-9)


def supported(percentile: float | None, n: int) -> bool:
    return percentile is None or n >= min_sample(percentile)


def undersampled_text(percentile: int, n: int, value: float, maximum: float | None = None, digits: int = 1,
                      unit: str = "") -> str:
    """A tail percentile its sample cannot carry, as what it is: the sample's maximum where the
    record keeps it, else the interpolated value named so (never called a maximum)."""
    u = f" {unit}" if unit else ""
    if maximum is not None and maximum == maximum:
        return f"max of {n}: {maximum:,.{digits}f}{u}"
    return f"n={n} < {min_sample(percentile)}: p{percentile} {value:,.{digits}f}{u} interpolated"


def percentile_text(percentile: int, value: float | None, n: int, unit: str = "ms",
                    maximum: float | None = None) -> str:
    """A percentile as a reader should see it: with its sample size, or, where the sample is too
    small for it, as `undersampled_text` says."""
    if value is None:
        return "-"
    if not supported(percentile, n):
        return undersampled_text(percentile, n, value, maximum, 0, unit)
    return f"{value:,.0f} {unit} (p{percentile}, n={n})"


def sized_percentiles(frame, count: str = "completed", rename: bool = True):
    """A table of per-point figures as a reader should see it: every percentile column above the
    median whose point has fewer requests than it needs reads "max of n: value" (the sample's
    largest value, from its `_max` column) or, in a record without one, the interpolated value
    named so; its header says so. Display only: the stored figures
    stay numbers."""
    import re

    out = frame.copy()
    if count not in out:
        return out
    for col in list(out.columns):
        m = re.search(r"_p(\d+)$", str(col))
        if not m or int(m.group(1)) <= 50:
            continue
        q = int(m.group(1))
        need = min_sample(q)
        top = frame[f"{col[:m.start()]}_max"] if f"{col[:m.start()]}_max" in frame else [None] * len(out)
        out[col] = [("-" if v is None or v != v else undersampled_text(q, int(n), v, mx, 0) if n < need
                     else f"{v:,.1f}") for v, n, mx in zip(out[col], out[count], top)]
        if rename:
            below = "the maximum" if f"{col[:m.start()]}_max" in frame else "interpolated"
            out = out.rename(columns={col: f"{col} (below n={need}: {below})"})
    return out


def confidence_text(confidence: float) -> str:
    """95% or 99.3%: a level as a reader writes it."""
    pct = round(100 * confidence, 1)
    return f"{pct:g}%"


def look_confidence(confidence: float, looks: int) -> float:
    """The per-look confidence that keeps the error rate over `looks` interim looks at 1 - confidence."""
    return 1 - (1 - confidence) / max(1, looks)


@dataclass(frozen=True)
class Interval:
    """A figure's estimate (the mean of its repetitions' estimates) and its interval."""
    estimate: float | None
    lo: float | None
    hi: float | None
    repetitions: int
    requests: int
    confidence: float

    def text(self, digits: int = 1) -> str:
        if self.estimate is None:
            return "-"
        if self.lo is None:
            return f"{self.estimate:,.{digits}f} (1 repetition: no interval)"
        return f"{self.estimate:,.{digits}f} [{self.lo:,.{digits}f}, {self.hi:,.{digits}f}]"


def interval(values: list[float], requests: int, confidence: float) -> Interval:
    """The t-interval of the mean of per-repetition estimates (none from a single repetition)."""
    v = np.asarray([x for x in values if x is not None and not math.isnan(x)], float)
    if v.size == 0:
        return Interval(None, None, None, 0, requests, confidence)
    mean = float(v.mean())
    if v.size < 2:
        return Interval(mean, None, None, 1, requests, confidence)
    half = float(stats.t.ppf(0.5 + confidence / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return Interval(mean, mean - half, mean + half, int(v.size), requests, confidence)


def _logs(values) -> np.ndarray:
    return np.log(np.asarray([x for x in values if x is not None and x == x and x > 0], float))


def _t(confidence: float, df: float) -> float:
    return float(stats.t.ppf(0.5 + confidence / 2, df))


def _log_interval(m: float, sd: float | None, df: int, n: int, confidence: float) -> tuple:
    if sd is None:
        return math.exp(m), None, None
    half = _t(confidence, df) * sd / math.sqrt(n)
    return math.exp(m), math.exp(m - half), math.exp(m + half)


def figure_intervals(cells: dict, confidence: float) -> dict:
    """Per cell (an arm at one load): the geometric mean of its repetition estimates and a
    multiplicative interval from the arm's log spread, pooled over the loads that share it
    (analysis.spread_pool), never below zero."""
    logs = {k: _logs(v) for k, v in cells.items()}
    plan = plan_spread(logs)
    return {k: (_log_interval(float(lv.mean()), *plan.of(k), lv.size, confidence) if lv.size else (None, None, None))
            for k, lv in logs.items()}


def _paired_logs(a, b) -> np.ndarray:
    ok = [(x, y) for x, y in zip(a, b) if x and y and x > 0 and y > 0]
    return np.log([x for x, _ in ok]) - np.log([y for _, y in ok]) if ok else np.asarray([])


def _spread_plans(pairs: dict, paired: bool, level: float | None = None) -> list:
    """The spread plan(s) of a pair's loads: one over the per-round log ratios when paired, else
    one per arm over its log estimates."""
    if paired:
        return [plan_spread({ld: _paired_logs(a, b) for ld, (a, b) in pairs.items()}, level)]
    return [plan_spread({ld: _logs(a) for ld, (a, _) in pairs.items()}, level),
            plan_spread({ld: _logs(b) for ld, (_, b) in pairs.items()}, level)]


def paired_intervals(pairs: dict, confidence: float, pooling_level: float | None = None) -> dict:
    """Per load: the ratio a/b from repetitions run in the same rounds, pair by pair (the mean of
    the per-round log ratios), with Student's t on their spread pooled over the loads that share
    it. Drift a round shares (the machine busier for A and B alike) cancels inside each pair: what
    interleaving the arms buys."""
    diffs = {load: _paired_logs(a, b) for load, (a, b) in pairs.items()}
    plan, = _spread_plans(pairs, True, pooling_level)
    return {load: (_log_interval(float(d.mean()), *plan.of(load), d.size, confidence) if d.size
                   else (math.nan, None, None)) for load, d in diffs.items()}


def welch_intervals(pairs: dict, confidence: float) -> dict:
    """Per load: the ratio of geometric means a/b with Welch's interval on the log scale, each arm's
    spread pooled over the loads that share it (Welch-Satterthwaite degrees of freedom)."""
    la = {load: _logs(a) for load, (a, _) in pairs.items()}
    lb = {load: _logs(b) for load, (_, b) in pairs.items()}
    pa, pb = _spread_plans(pairs, False)
    out = {}
    for load in pairs:
        x, y = la[load], lb[load]
        if x.size == 0 or y.size == 0:
            out[load] = (math.nan, None, None)
            continue
        diff = float(x.mean() - y.mean())
        (sa, dfa), (sb, dfb) = pa.of(load), pb.of(load)
        if sa is None or sb is None:
            out[load] = (math.exp(diff), None, None)
            continue
        va, vb = sa ** 2 / x.size, sb ** 2 / y.size
        se = math.sqrt(va + vb)
        if se == 0:
            out[load] = (math.exp(diff),) * 3
            continue
        df = (va + vb) ** 2 / (va ** 2 / dfa + vb ** 2 / dfb)
        half = _t(confidence, df) * se
        out[load] = (math.exp(diff), math.exp(diff - half), math.exp(diff + half))
    return out


def paired_ratio_interval(a: list[float], b: list[float], confidence: float
                          ) -> tuple[float, float | None, float | None]:
    """One load's paired ratio and interval (no other loads to pool with)."""
    return paired_intervals({0: (a, b)}, confidence)[0]


def ratio_interval(a: list[float], b: list[float], confidence: float) -> tuple[float, float | None, float | None]:
    """One load's ratio of geometric means with Welch's interval on the log scale; (ratio, None,
    None) when either side has fewer than two positive repetitions."""
    return welch_intervals({0: (a, b)}, confidence)[0]


@dataclass(frozen=True)
class PairDecision:
    """One comparison of two arms on one figure at one load, as the rule decides it."""
    load: float
    metric: str
    arm_a: str
    arm_b: str
    decision: str
    leader: str | None
    ratio: float | None
    lo: float | None
    hi: float | None
    confidence: float
    method: str
    repetitions_a: int
    repetitions_b: int
    requests_a: int
    requests_b: int
    text: str
    pooled_loads: int = 1                  # loads whose repetitions the spread was pooled over
    degrees_of_freedom: float | None = None
    this_load_lo: float | None = None      # the interval from this load's repetitions alone
    this_load_hi: float | None = None

    def as_row(self) -> dict:
        return dict(self.__dict__)


def _inverse(x: float) -> float:
    """1/x, where a bound that underflowed to 0 (rounds that differ by hundreds of orders of
    magnitude) reads as unbounded rather than failing the decision."""
    return math.inf if x == 0 else 1 / x


def _pct(x: float) -> str:
    return f"{100 * x:+.0f}%"


def decide_pair(load: float, metric: Compared, arm_a: str, a: list[float], requests_a: int,
                arm_b: str, b: list[float], requests_b: int, min_effect: float, confidence: float,
                paired: bool = False) -> PairDecision:
    """The rule on one pair at one load, its interval from that load alone. `paired`: a[i] and
    b[i] come from the same round (the same repetition of an interleaved run)."""
    ratio, lo, hi = (paired_ratio_interval if paired else ratio_interval)(a, b, confidence)
    reps = (len([x for x in a if x]), len([x for x in b if x]))
    return decide(load, metric, arm_a, arm_b, (ratio, lo, hi), reps, (requests_a, requests_b), min_effect,
                  confidence, METHODS[paired])


def weak_note(degrees_of_freedom: float | None) -> str:
    """A decision resting on fewer than two degrees of freedom is weak (its t-quantile at 95% is
    12.7 on one), and its words say so; the answer block and the decision table share them."""
    if degrees_of_freedom is None or degrees_of_freedom >= 2:
        return ""
    return "; on one degree of freedom: weak" if degrees_of_freedom >= 1 else "; no run-to-run spread measured: weak"


METHODS = {True: "paired by round (t over per-round log ratios)", False: "Welch (log scale)"}


def decide(load: float, metric: Compared, arm_a: str, arm_b: str, ratio_lo_hi: tuple, repetitions: tuple[int, int],
           requests: tuple[int, int], min_effect: float, confidence: float, method: str,
           degrees_of_freedom: float | None = None, df_step: int = 1) -> PairDecision:
    """The rule applied to one ratio and its interval: ahead (the whole interval beyond the margin,
    on the better side), no difference (the whole interval inside the margin), else undecided,
    saying on how many degrees of freedom and about how many more rounds would decide it."""
    ratio, lo, hi = ratio_lo_hi
    ra, rb = repetitions
    base = dict(load=load, metric=metric.name, arm_a=arm_a, arm_b=arm_b,
                ratio=ratio if ratio is not None and not math.isnan(ratio) else None,
                lo=lo, hi=hi, confidence=confidence, method=method,
                repetitions_a=ra, repetitions_b=rb, requests_a=requests[0], requests_b=requests[1])
    if lo is None:
        why = ("one repetition per arm measures no run-to-run noise" if ra and rb else "an arm has no measurement")
        return PairDecision(**base, decision=UNDECIDED, leader=None,
                            text=f"{metric.label}: undecided with this sample ({why}): add repetitions.")
    span = f"interval {_pct(lo - 1)} to {_pct(hi - 1)} for {arm_a}/{arm_b}"
    upper, lower = 1 + min_effect, 1 - min_effect
    if lower < lo and hi < upper:
        return PairDecision(**base, decision=NO_DIFFERENCE, leader=None,
                            text=f"{metric.label}: no difference larger than {min_effect:.0%} ({span})"
                                 f"{weak_note(degrees_of_freedom)}.")
    a_better = lo > upper if metric.higher_is_better else hi < lower
    b_better = hi < lower if metric.higher_is_better else lo > upper
    if a_better or b_better:
        leader, other = (arm_a, arm_b) if a_better else (arm_b, arm_a)
        r, rlo, rhi = (ratio, lo, hi) if a_better else (_inverse(ratio), _inverse(hi), _inverse(lo))
        if metric.higher_is_better:
            how = f"{metric.label} {r - 1:.0%} higher ({rlo - 1:.0%} to {rhi - 1:.0%})"
        else:
            how = f"{metric.label} {1 - r:.0%} lower ({1 - rhi:.0%} to {1 - rlo:.0%})"
        return PairDecision(
            **base,
            decision=AHEAD,
            leader=leader,
            text=f"{leader} ahead of {other}: {how}{weak_note(degrees_of_freedom)}.",
        )
    degrees, advice = undecided_words(lo, hi, min_effect, confidence, degrees_of_freedom, min(ra, rb) or 1, df_step)
    return PairDecision(**base, decision=UNDECIDED, leader=None,
                        text=f"{metric.label}: undecided with this sample ({span} spans the {min_effect:.0%} margin"
                             f"{degrees}): {advice}.")


def _spread_source(plan, load) -> str:
    apart = [x.text() for x in plan.set_apart if x.key == load]
    if apart:
        return apart[0]
    n = len(plan.pooled)
    return f"spread pooled over {n} loads" if n > 1 else "spread from this load's repetitions alone"


def _degrees(df: float) -> str:
    return f"{df:g} degree{'' if df == 1 else 's'} of freedom"


def with_provenance(d: PairDecision, pairs: dict, paired: bool, confidence: float,
                    min_effect: float) -> PairDecision:
    """The decision with how its interval was built, so a reader can rebuild it: the loads its
    spread was pooled over and their degrees of freedom, or why this load's spread was set apart,
    and beside it the interval this load's repetitions give alone (wider with few repetitions:
    what pooling buys, and what it assumes, that the pooled loads share one run-to-run spread)."""
    a, b = pairs[d.load]
    plans = _spread_plans(pairs, paired)
    dfs = [p.of(d.load)[1] for p in plans]
    dof = (_degrees(dfs[0]) if paired
           else f"{dfs[0]:g} and {_degrees(dfs[1])} for the two arms")
    who = [""] if paired else [f"{d.arm_a}: ", f"{d.arm_b}: "]
    parts = [w + _spread_source(p, d.load) for w, p in zip(who, plans)]
    _, lo, hi = (paired_ratio_interval if paired else ratio_interval)(a, b, confidence)
    how = "; ".join([d.method, *parts]) + f", {dof}"
    pooled_over = max(len(p.pooled) if d.load in p.pooled else 1 for p in plans)
    worded = decide(d.load, COMPARED_BY_NAME[d.metric], d.arm_a, d.arm_b, (d.ratio, d.lo, d.hi),
                    (d.repetitions_a, d.repetitions_b), (d.requests_a, d.requests_b), min_effect, d.confidence,
                    d.method, sum(dfs), df_per_round(paired, pooled_over))
    return replace(d, text=worded.text, method=how, pooled_loads=pooled_over, degrees_of_freedom=sum(dfs),
                   this_load_lo=lo, this_load_hi=hi)
