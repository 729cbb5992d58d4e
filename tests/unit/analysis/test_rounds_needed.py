"""An undecided comparison says on how many degrees of freedom it rests and about how many more
rounds would decide it at its current estimate."""
import math

from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from stackbook.analysis.rounds_needed import MOST_ROUNDS, rounds_to_decide, undecided_words


def _half(spread, rounds, dof, confidence):
    return float(stats.t.ppf(0.5 + confidence / 2, dof)) * spread / math.sqrt(rounds)


def test_one_degree_of_freedom_is_decided_by_one_more_round_when_the_rounds_agree():
    """The AVX2 quickstart's TPOT at concurrency 1: rounds read 0.42 and 0.51, the 97.5% interval on
    one degree of freedom spanned -96% to +442%. The two rounds agree; one more decides it."""
    logs = [math.log(0.42), math.log(0.51)]
    centre, sd = sum(logs) / 2, abs(logs[0] - logs[1]) / math.sqrt(2)
    half = _half(sd, 2, 1, 0.975)
    lo, hi = math.exp(centre - half), math.exp(centre + half)
    assert round(lo - 1, 2) == -0.96 and 4.3 < hi - 1 < 4.6  # the rounds were printed to two digits
    assert rounds_to_decide(lo, hi, 0.05, 0.975, 1, 2, 1) == 1
    degrees, advice = undecided_words(lo, hi, 0.05, 0.975, 1, 2, 1)
    assert degrees == ", on 1 degree of freedom"
    assert advice == "add repetitions: about 1 more round would decide it at this estimate"


def test_an_estimate_on_the_margin_s_edge_gives_no_count():
    edge = 1.05
    lo, hi = edge / 1.3, edge * 1.3
    assert rounds_to_decide(lo, hi, 0.05, 0.95, 3, 4, 1) is None
    assert f"even {MOST_ROUNDS} more rounds" in undecided_words(lo, hi, 0.05, 0.95, 3, 4, 1)[1]


def test_without_degrees_of_freedom_the_sentence_keeps_its_plain_advice():
    assert undecided_words(0.5, 2.0, 0.05, 0.95, None, 2, 1) == ("", "add repetitions")


@settings(max_examples=200, deadline=None)
@given(st.floats(-0.5, 0.5), st.floats(0.01, 0.8), st.integers(2, 6), st.integers(1, 3),
       st.sampled_from([0.95, 0.975]), st.sampled_from([1, 2]))
def test_the_count_is_the_fewest_rounds_whose_interval_would_decide(centre, half, rounds, pooled, confidence, step):
    """At the returned count the interval at today's ratio and spread clears the margin or fits
    inside it; one round fewer it does not."""
    lo, hi = math.exp(centre - half), math.exp(centre + half)
    dof = (rounds - 1) * pooled
    need = abs(abs(centre) - math.log(1.05))
    more = rounds_to_decide(lo, hi, 0.05, confidence, dof, rounds, step)
    spread = half * math.sqrt(rounds) / float(stats.t.ppf(0.5 + confidence / 2, dof))
    if more is None:
        assert _half(spread, rounds + MOST_ROUNDS, dof + MOST_ROUNDS * step, confidence) >= need * (1 - 1e-9)
        return
    assert _half(spread, rounds + more, dof + more * step, confidence) < need
    if more > 1:
        assert _half(spread, rounds + more - 1, dof + (more - 1) * step, confidence) >= need
