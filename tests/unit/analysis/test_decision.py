"""The decision rule against independent numbers: scipy's own Welch interval, the percentile
support rule, and identical arms that must never be ranked."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from stackbook.analysis.decision import (
    AHEAD,
    COMPARED_BY_NAME,
    NO_DIFFERENCE,
    UNDECIDED,
    decide_pair,
    interval,
    look_confidence,
    min_sample,
    percentile_text,
    ratio_interval,
)

TP = COMPARED_BY_NAME["output_throughput"]
TTFT = COMPARED_BY_NAME["ttft_p50"]


def test_the_log_ratio_interval_is_scipys_welch_interval():
    a, b = [47.6, 46.9, 48.3], [44.2, 45.0, 43.1, 44.8]
    ratio, lo, hi = ratio_interval(a, b, 0.95)
    ci = stats.ttest_ind(np.log(a), np.log(b), equal_var=False).confidence_interval(0.95)
    assert math.isclose(lo, math.exp(ci.low), rel_tol=1e-9) and math.isclose(hi, math.exp(ci.high), rel_tol=1e-9)
    g = math.exp(np.mean(np.log(a)) - np.mean(np.log(b)))
    assert math.isclose(ratio, g, rel_tol=1e-12)


def test_the_interval_of_repetition_estimates_is_students_t():
    iv = interval([10.0, 12.0], requests=16, confidence=0.95)
    # mean 11, sd sqrt(2), t(0.975, 1) = 12.706: half-width 12.706 * sqrt(2) / sqrt(2)
    assert iv.estimate == 11 and math.isclose(iv.hi - iv.estimate, 12.7062047, rel_tol=1e-6)
    assert interval([10.0], 8, 0.95).lo is None


def test_percentiles_need_their_sample():
    assert (min_sample(50), min_sample(95), min_sample(99)) == (2, 20, 100)
    # Too few for p99: the sample's maximum where the record keeps it, else the interpolated value named so.
    assert percentile_text(99, 2076.0, 8, maximum=2100.0) == "max of 8: 2,100 ms"
    assert percentile_text(99, 2076.0, 8) == "n=8 < 100: p99 2,076 ms interpolated"
    assert percentile_text(99, 2076.0, 128) == "2,076 ms (p99, n=128)"


def test_sequential_looks_share_the_error_rate():
    assert math.isclose(look_confidence(0.95, 7), 1 - 0.05 / 7)


def test_a_clear_gap_is_ahead_with_its_interval_and_either_order_reads_the_same():
    a, b = [50.0, 51.0, 49.5], [40.0, 40.5, 39.8]
    d = decide_pair(2, TP, "a", a, 24, "b", b, 24, 0.05, 0.95)
    r = decide_pair(2, TP, "b", b, 24, "a", a, 24, 0.05, 0.95)
    assert d.decision == r.decision == AHEAD and d.leader == r.leader == "a"
    assert d.text.startswith("a ahead of b: output throughput 25% higher (")
    assert d.text == r.text


def test_lower_is_better_for_latency():
    d = decide_pair(1, TTFT, "slow", [670.0, 690.0], 16, "fast", [97.0, 99.0], 16, 0.05, 0.95)
    assert d.decision == AHEAD and d.leader == "fast" and d.text.startswith("fast ahead of slow: TTFT p50 86% lower")


def test_a_gap_as_large_as_the_noise_is_undecided():
    d = decide_pair(1, TP, "a", [47.6, 44.0], 16, "b", [44.2, 45.7], 16, 0.05, 0.95)
    assert d.decision == UNDECIDED and d.leader is None and "add repetitions" in d.text


def test_two_tight_equal_arms_are_no_difference():
    d = decide_pair(1, TP, "a", [45.0, 45.2, 44.9, 45.1], 32, "b", [45.1, 44.8, 45.0, 45.2], 32, 0.05, 0.95)
    assert d.decision == NO_DIFFERENCE and d.text.startswith("output throughput: no difference larger than 5%")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(1.0, 1000.0), min_size=2, max_size=8), st.randoms(use_true_random=False))
def test_identical_arms_are_never_ranked(values, rng):
    """An A/A pair: the same repetition estimates in another order can only be no difference or
    undecided, never a winner."""
    other = list(values)
    rng.shuffle(other)
    for metric in (TP, TTFT):
        d = decide_pair(1, metric, "first", values, 8 * len(values), "second", other, 8 * len(values), 0.05, 0.95)
        assert d.decision in (NO_DIFFERENCE, UNDECIDED) and d.leader is None


@pytest.mark.parametrize("effect", [0.02, 0.10])
def test_the_margin_is_the_campaigns(effect):
    a, b = [45.0, 45.1, 44.9], [42.0, 42.1, 41.9]  # 7% apart, tight
    d = decide_pair(1, TP, "a", a, 24, "b", b, 24, effect, 0.95)
    assert d.decision == (AHEAD if effect == 0.02 else NO_DIFFERENCE if effect == 0.10 else None)


def test_pairing_by_round_cancels_drift_the_round_shares():
    """The machine slows by 20% in the second and third rounds for both arms alike: the paired
    interval sees a steady 10% gap, Welch's sees the drift."""
    a = [55.0, 44.0, 44.1, 55.2]
    b = [50.0, 40.0, 40.2, 50.1]
    paired = decide_pair(1, TP, "a", a, 32, "b", b, 32, 0.05, 0.95, paired=True)
    welch = decide_pair(1, TP, "a", a, 32, "b", b, 32, 0.05, 0.95)
    assert paired.decision == AHEAD and paired.method.startswith("paired by round")
    assert welch.decision == UNDECIDED and welch.method == "Welch (log scale)"
    d = np.log(a) - np.log(b)
    ci = stats.ttest_1samp(d, 0).confidence_interval(0.95)
    assert math.isclose(paired.lo, math.exp(ci.low)) and math.isclose(paired.hi, math.exp(ci.high))


def test_an_undersampled_tail_in_a_committed_run_is_never_called_its_maximum():
    """workloads/reference vllm-cpu rate2-r0 stores an interpolated p99 of 16 requests; the table
    once printed it as "max of 16". Recomputed from its records the maximum differs, and only the
    maximum is shown under that name."""
    import json

    import pandas as pd

    from stackbook.analysis.decision import sized_percentiles
    from stackbook.config.loading import load_campaign
    from stackbook.evidence.rundir import RunDir
    from stackbook.loadgen.records import read_records
    from stackbook.measure.metrics import point_summary

    run = RunDir("outputs/workloads/reference")
    d = run.arm("vllm-cpu")
    point = json.loads(d.results.read_text())["sweep"]["points"]["rate2-r0"]
    point = {k: v for k, v in point.items() if k != "e2e_ms_max"}  # as stored before points kept their maximum
    records = [r for r in read_records(d.requests, latest_attempt=True) if r.point == "rate2-r0"]
    again = point_summary(records, load_campaign(run.campaign_resolved).protocol.slo)
    assert again["e2e_ms_max"] > point["e2e_ms_p99"]  # the stored p99 is not the maximum
    stored = sized_percentiles(pd.DataFrame([point]))
    cell = stored.filter(like="e2e_ms_p99").iloc[0, 0]
    assert "interpolated" in cell and "max of" not in cell
    shown = sized_percentiles(pd.DataFrame([point | {"e2e_ms_max": again["e2e_ms_max"]}])).filter(like="e2e_ms_p99")
    assert shown.iloc[0, 0] == f"max of {point['completed']}: {again['e2e_ms_max']:,.0f}"


def test_each_decision_says_how_its_interval_was_built_and_what_its_load_alone_gives():
    """quickstart/reference: the pooled interval at concurrency 1 rests on three loads' spread; from
    that load's two rounds alone it is far wider, and the row shows both."""
    from stackbook.analysis.comparison import analyse_run

    d = next(x for x in analyse_run("outputs/quickstart/reference").decisions
             if x["load"] == 1 and x["metric"] == "output_throughput")
    assert d["method"] == ("paired by round (t over per-round log ratios); spread pooled over 3 loads, "
                           "3 degrees of freedom")
    assert (round(d["lo"], 2), round(d["hi"], 2)) == (1.31, 1.56)
    assert (round(d["this_load_lo"], 2), round(d["this_load_hi"], 2)) == (0.84, 2.46)
    assert d["pooled_loads"] == 3 and d["degrees_of_freedom"] == 3


def test_a_discarded_repetition_drops_its_round_from_that_pair_at_that_load_only():
    """One arm's repetition discarded at one load: the pair stays paired by round, over the rounds
    both kept at that load and every round elsewhere, and the method says what was left out
    (before, the whole pair fell back to Welch's interval at every load)."""
    import pandas as pd
    from stackbook.analysis.verdict import decisions
    from stackbook.config.loading import load_campaign

    protocol = load_campaign("campaigns/known-effect.yaml").protocol
    drift = (1.0, 1.25, 0.85)  # every arm moves with the round; the ratio between arms stays 2:3
    rows = [{"arm": arm, "label": "accepted", "load": load, "repetition": rep, "completed": 40, "requests": 40,
             "discarded": (arm, load, rep) == ("a", 0.4, 0), "output_throughput_tok_s": 100 / (base * d),
             "ttft_ms_p50": 400 * d, "tpot_ms_p50": base * d * (1 + 0.01 * rep), "e2e_ms_p50": 30 * base * d}
            for arm, base in (("a", 20.0), ("b", 30.0)) for load in (0.4, 0.8) for rep, d in enumerate(drift)]
    found = {d.load: d for d in decisions(pd.DataFrame(rows), protocol, {"a", "b"}) if d.metric == "tpot_p50"}
    assert all(d.method.startswith("paired by round") and d.decision == AHEAD and d.leader == "a"
               for d in found.values()), found
    assert ("over the rounds both kept "
            "(1, 2; left out: b's repetition 0, whose partner was discarded)" in found[0.4].method)
    assert "left out" not in found[0.8].method
    assert (found[0.4].repetitions_a, found[0.4].repetitions_b, found[0.8].repetitions_b) == (2, 2, 3)
    assert found[0.4].requests_b == 80 and found[0.8].requests_b == 120


def test_one_degree_of_freedom_is_singular():
    """A load whose spread rests on one pair of rounds says "1 degree of freedom" (the committed
    runs read "1 degrees of freedom" before)."""
    from stackbook.analysis.decision import _degrees

    assert [_degrees(x) for x in (1, 1.0, 3, 1.5)] == [
        "1 degree of freedom", "1 degree of freedom", "3 degrees of freedom", "1.5 degrees of freedom"]


def test_a_decision_on_one_degree_of_freedom_says_it_is_weak_and_one_on_two_does_not():
    from stackbook.analysis.decision import COMPARED_BY_NAME, decide, weak_note

    tp = COMPARED_BY_NAME["output_throughput"]
    one = decide(4, tp, "a", "b", (4.29, 1.06, 17.45), (2, 2), (12, 12), 0.05, 0.95, "m", degrees_of_freedom=1)
    assert one.decision == "ahead"
    assert one.text == "a ahead of b: output throughput 329% higher (6% to 1645%); on one degree of freedom: weak."
    two = decide(4, tp, "a", "b", (4.29, 1.06, 17.45), (3, 3), (12, 12), 0.05, 0.95, "m", degrees_of_freedom=2)
    assert two.text == "a ahead of b: output throughput 329% higher (6% to 1645%)."
    same = decide(4, tp, "a", "b", (1.0, 0.99, 1.01), (2, 2), (12, 12), 0.05, 0.95, "m", degrees_of_freedom=1)
    assert same.text.endswith("; on one degree of freedom: weak.")
    assert weak_note(0) == "; no run-to-run spread measured: weak" and weak_note(None) == ""
