"""The arithmetic set beside a measured capacity: errors against an interval, the largest load a
predicted curve allows, the repetitions' combined interval, the cost per million tokens."""
import pytest

from stackbook.analysis.capacity_summary import capacity_sentence, ladder_rungs
from stackbook.capacity.predictions import (
    combined_interval,
    cost_per_m_output_tokens,
    interval_error,
    largest_within,
)


def test_an_error_is_zero_where_the_capacity_may_lie_and_relative_to_the_nearest_such_load_elsewhere():
    # Inside at 2, outside at 4: the capacity is 2 or 3 clients.
    assert interval_error(3, 2, 4) == interval_error(2, 2, 4) == 0.0
    assert interval_error(4, 2, 4) == pytest.approx(1 / 3)   # 4 was proven outside: a third above 3
    assert interval_error(6, 2, 4) == pytest.approx(1.0)     # twice the highest possible, 3
    assert interval_error(1, 2, 4) == pytest.approx(-0.5)    # half the lower end
    assert interval_error(4.2, 2.0, 4.0, integer=False) == pytest.approx(0.05)  # a rate: the upper end itself
    assert interval_error(None, 2, 4) is None
    assert interval_error(9, 2, None) is None                # above a one-sided interval: not refuted
    assert interval_error(1, 2, None) == pytest.approx(-0.5)


def test_the_largest_load_within_a_bound_stops_at_the_first_that_exceeds_it():
    assert largest_within(lambda n: 100 * n, 350, 16) == 3
    assert largest_within(lambda n: 100 * n, 50, 16) is None
    assert largest_within(lambda n: 1, 50, 16) == 16


def test_the_combined_interval_keeps_what_every_repetition_proved():
    assert combined_interval([{"lower": 2, "upper": 3}, {"lower": 3, "upper": 4}])[:2] == (2, 4)
    lower, upper, words = combined_interval([{"lower": 2, "upper": 3}, {"lower": 2, "upper": 3}])
    assert (lower, upper) == (2, 3) and "same interval" in words
    assert combined_interval([{"lower": None, "upper": 3}, {"lower": 2, "upper": 3}])[:2] == (None, 3)
    assert "differ" in combined_interval([{"lower": 2, "upper": 3}, {"lower": 3, "upper": None}])[2]
    assert combined_interval([])[:2] == (None, None)


def test_cost_per_million_output_tokens():
    # 100 tokens/s for an hour is 360,000 tokens: $0.36 an hour buys them at $1 per million.
    assert cost_per_m_output_tokens(0.36, 100) == pytest.approx(1.0)
    assert cost_per_m_output_tokens(0.36, 0) is None


def test_the_sentence_says_only_what_the_interval_proves():
    slo = {"ttft_ms": 1000, "tpot_ms": 100}
    s = capacity_sentence("a", 2, 3, slo, 0.9)
    assert s.startswith("a carries 2 concurrent users inside TTFT ≤ 1000 ms and TPOT ≤ 100 ms for at least 90%")
    assert "not 3" in s
    assert "may lie higher" in capacity_sentence("a", 16, None, slo, 0.9)
    assert "no load was proven inside" in capacity_sentence("a", None, 1, slo, 0.9)
    assert ladder_rungs({"start": 1, "tolerance": 1}, 5) == 5 and ladder_rungs({"start": 1, "tolerance": 1}, None) is None
