"""One step of the search loop, function by function, on hand-computed values; and the accept
rule's two promises as properties: an accepted change is ahead by the margin, an A/A one never is."""
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stackbook.engines.knobs import Knob, grid_size
from stackbook.search.step import (MOST_GAIN, Point, bottleneck, changes_from, choose, judge, model_error,
                                   point_from_requests, predicted_gain, rank, stop_reason)

KNOBS = [Knob(name="b", layer="orchestration", values=(1, 2, 4), default=1),
         Knob(name="k", layer="kernels", values=("slow", "fast"), default="slow"),
         Knob(name="aa", layer="host execution", values=("x", "y"), default="x", control=True)]


def _pt(goodput=1.0, wait=0.0, decode=1.0) -> Point:
    return Point(goodput_tok_s=goodput, requests=10, met=10, wait_s=wait, decode_s=decode, duration_s=1.0)


def test_a_point_counts_only_the_tokens_of_requests_inside_every_bound():
    # (ttft, tpot, tokens): the second misses TPOT, the third TTFT; 10 tokens over 2 s inside the SLO.
    p = point_from_requests([(0.1, 0.01, 10), (0.1, 0.05, 20), (0.9, 0.01, 30)], 2.0, ttft_s=0.5, tpot_s=0.02)
    assert (p.goodput_tok_s, p.met, p.requests) == (5.0, 1, 3)
    assert p.wait_s == pytest.approx(((0.1 - 0.01) + (0.1 - 0.05) + (0.9 - 0.01)) / 3)
    assert p.decode_s == pytest.approx((0.01 * 9 + 0.05 * 19 + 0.01 * 29) / 3)
    with pytest.raises(ValueError, match="at least one measured request"):
        point_from_requests([], 1.0, None, None)


def test_the_bottleneck_is_where_the_requests_time_goes():
    assert bottleneck([_pt(wait=2, decode=1)]) == "orchestration"
    assert bottleneck([_pt(wait=1, decode=2), _pt(wait=0.5, decode=0.1)]) == "kernels"


def test_the_model_error_is_its_miss_on_the_incumbent_never_under_the_floor():
    assert model_error(120, 100, 0.05) == pytest.approx(0.2)
    assert model_error(101, 100, 0.05) == 0.05
    assert model_error(50, 0, 0.05) == 1.0
    assert model_error(1.2, 1e-13, 0.05) == 1.0  # an erf tail is a prediction of none, not a 1e13 miss
    assert model_error(0, 1e-13, 0.05) == 0.05


def test_a_gain_over_an_incumbent_that_serves_none_is_worded_as_what_the_candidate_serves():
    def predict(c):
        return 0.0 if c["b"] == 1 else 2.5 * c["b"]
    ranked = rank({"b": 1, "k": "slow", "aa": "x"}, KNOBS, predict, measured=0.0, layer="orchestration",
                  error_floor=0.05)
    assert [(c.changes, c.from_nothing, c.gain_words()) for c in ranked[:2]] == [
        ({"b": 4}, True, "10.0 tok/s where the incumbent serves none"),
        ({"b": 2}, True, "5.0 tok/s where the incumbent serves none")]
    some = rank({"b": 1, "k": "slow", "aa": "x"}, KNOBS, lambda c: c["b"], 1.0, "orchestration", 0.05)
    assert (some[0].from_nothing, some[0].gain_words()) == (False, "+300%")


def test_a_gain_is_against_the_models_incumbent_else_the_measured_one():
    assert predicted_gain(150, 100, 80) == pytest.approx(0.5)
    assert predicted_gain(40, 0, 80) == pytest.approx(-0.5)
    assert predicted_gain(10, 0, 0) == MOST_GAIN and predicted_gain(0, 0, 0) == 0.0


def test_changes_leave_out_the_incumbents_values_and_the_aa_knobs():
    inc = {"b": 1, "k": "slow", "aa": "x"}
    singles = changes_from(inc, KNOBS, 1)
    assert [(k.name, v) for (k, v), in singles] == [("b", 2), ("b", 4), ("k", "fast")]
    pairs = changes_from(inc, KNOBS, 2)
    assert [tuple((k.name, v) for k, v in c) for c in pairs] == [(("b", 2), ("k", "fast")), (("b", 4), ("k", "fast"))]
    assert grid_size(tuple(KNOBS)) == 6


def test_rank_puts_the_bottleneck_first_then_the_gain_and_skips_what_was_tried():
    def predict(c):  # b scales goodput, the fast kernel adds half
        return c["b"] * (1.5 if c["k"] == "fast" else 1.0)
    inc = {"b": 1, "k": "slow", "aa": "x"}
    ranked = rank(inc, KNOBS, predict, measured=1.0, layer="kernels", error_floor=0.05)
    assert [(c.changes, round(c.predicted_gain, 2), c.on_bottleneck) for c in ranked] == [
        ({"k": "fast"}, 0.5, True), ({"b": 4}, 3.0, False), ({"b": 2}, 1.0, False)]
    assert ranked[0].model_error == 0.05
    again = rank(inc, KNOBS, predict, 1.0, "kernels", 0.05, tried={ranked[0].key})
    assert [c.changes for c in again] == [{"b": 4}, {"b": 2}]


def test_choose_takes_the_first_ranked_change_clearing_the_margin():
    def predict(c):
        return {1: 1.0, 2: 1.03, 4: 1.2}[c["b"]]
    inc = {"b": 1, "k": "slow", "aa": "x"}
    ranked = rank(inc, KNOBS, predict, 1.0, "kernels", 0.05)  # the kernel change gains nothing
    assert choose(ranked, 0.05).changes == {"b": 4}
    assert choose(ranked, 0.25) is None


def test_judge_accepts_only_an_interval_wholly_beyond_the_margin():
    inc = [100.0, 102.0, 98.0, 101.0]
    ahead = judge(inc, [130.0, 131.0, 128.0, 132.0], 0.05, 0.95)
    assert ahead.accepted and ahead.decision == "ahead" and ahead.lo > 1.05
    near = judge(inc, [104.0, 107.0, 101.0, 105.0], 0.05, 0.95)  # about 4% ahead: inside the margin
    assert not near.accepted and near.decision in ("no difference", "undecided")
    assert not judge(inc, [60.0, 61.0, 59.0, 60.0], 0.05, 0.95).accepted
    # An incumbent that met the SLO in no round loses to a candidate that did in every round.
    assert judge([0.0, 0.0], [5.0, 6.0], 0.05, 0.95).accepted
    assert not judge([0.0, 0.0], [5.0, 0.0], 0.05, 0.95).accepted
    assert not judge([10.0, 10.0], [0.0, 30.0], 0.05, 0.95).accepted
    with pytest.raises(ValueError, match="pair up"):
        judge([1.0], [1.0, 2.0], 0.05, 0.95)


def test_the_loop_stops_on_either_budget_or_when_nothing_helps():
    c = rank({"b": 1, "k": "slow", "aa": "x"}, KNOBS, lambda c: c["b"], 1.0, "kernels", 0.05)[0]
    assert stop_reason(3, 3, 0, 10, c).startswith("step budget spent")
    assert stop_reason(1, 3, 11, 10, c).startswith("time budget spent")
    assert stop_reason(1, 3, 1, 10, None) == "no candidate is predicted to clear the margin"
    assert stop_reason(1, 3, 1, 10, c) is None


def test_a_candidate_rounds_apart_by_hundreds_of_orders_of_magnitude_is_judged_not_failed():
    """Ratios near 1e-309 put the interval's lower bound at 0.0 in floats: the incumbent leads,
    its interval unbounded above, and the candidate is not accepted (the rule's inversion once
    divided by that zero)."""
    j = judge([1.0, 1.0, 1.0], [1.0, 2.225073858507203e-309, 2.225073858507203e-309], 0.25, 0.8125)
    assert j.lo == 0.0 and (j.accepted, j.decision) == (False, "ahead")
    assert j.text.startswith("incumbent ahead of candidate") and "inf%" in j.text


rounds = st.integers(2, 8)
goodput = st.floats(1.0, 1000.0, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(n=rounds, data=st.data(), margin=st.floats(0.01, 0.3), confidence=st.floats(0.8, 0.99))
def test_an_accepted_change_is_always_ahead_by_the_margin(n, data, margin, confidence):
    inc = data.draw(st.lists(goodput, min_size=n, max_size=n))
    cand = data.draw(st.lists(st.floats(0.0, 2000.0, allow_nan=False), min_size=n, max_size=n))
    j = judge(inc, cand, margin, confidence)
    if j.accepted:
        assert j.lo is not None and j.lo > 1 + margin
        assert math.exp(sum(math.log(c / i) for c, i in zip(cand, inc)) / n) > 1 + margin


@settings(max_examples=300, deadline=None)
@given(n=rounds, data=st.data(), margin=st.floats(0.01, 0.3), confidence=st.floats(0.8, 0.99))
def test_an_aa_change_whose_rounds_differ_only_by_noise_inside_the_margin_is_never_accepted(n, data, margin,
                                                                                            confidence):
    inc = data.draw(st.lists(goodput, min_size=n, max_size=n))
    noise = data.draw(st.lists(st.floats(1 / (1 + margin), 1 + margin), min_size=n, max_size=n))
    assert not judge(inc, [i * e for i, e in zip(inc, noise)], margin, confidence).accepted
