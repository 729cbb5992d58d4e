"""Which loads share a spread: one odd repetition at one load must not blind the others."""
import math

import numpy as np
import pytest
from stackbook.analysis.decision import COMPARED_BY_NAME, decide, paired_intervals, with_provenance, METHODS
from stackbook.analysis.spread_pool import plan_spread

TPOT = COMPARED_BY_NAME["tpot_p50"]

# TPOT p50 per round (ms): arm "fast" read 91.0 in its first round at concurrency 4 and 70.3 in
# its second; "slow" is the same server with 8 ms added to every token gap.
ODD = {1: ([33.3, 32.8], [40.8, 41.0]), 4: ([91.0, 70.3], [78.2, 77.8])}


def _decisions(pairs):
    iv = paired_intervals(pairs, 0.95)
    return {ld: with_provenance(decide(ld, TPOT, "fast", "slow", iv[ld], (2, 2), (64, 64), 0.05, 0.95,
                                       METHODS[True]), pairs, True, 0.95, 0.05) for ld in pairs}


def test_an_odd_load_is_set_apart_and_the_other_load_decides_with_the_truth_inside():
    d = _decisions(ODD)
    assert d[1].decision == "ahead" and d[1].leader == "fast"
    assert d[1].lo < 0.81 < d[1].hi < 0.95  # the per-round ratios read 0.816 and 0.800
    assert d[4].decision == "undecided"
    assert "load 4's spread set apart (variance 160× the other loads'" in d[4].method
    assert d[4].pooled_loads == 1 and d[4].degrees_of_freedom == 1


def test_pooling_every_load_blinds_both_loads():
    iv = paired_intervals(ODD, 0.95, pooling_level=0)
    assert (round(iv[1][1], 2), round(iv[1][2], 2)) == (0.55, 1.19)  # "-45% to +19%": undecided


def test_loads_that_vary_alike_share_one_spread():
    rng = np.random.default_rng(7)
    cells = {ld: rng.normal(0, 0.03, 2) for ld in (1, 2, 4)}
    plan = plan_spread(cells)
    assert plan.set_apart == () and plan.pooled == (1, 2, 4)
    sd, df = plan.of(2)
    pooled_ss = sum(((c - c.mean()) ** 2).sum() for c in cells.values())
    assert df == 3 and sd == pytest.approx(math.sqrt(pooled_ss / 3))


def test_one_outlier_cannot_hide_behind_its_own_variance():
    """Leave-one-out: the odd load is tested against the others' spread, not a pool it inflates."""
    cells = {1: [0.0, 0.02], 2: [0.01, -0.01], 4: [0.0, 0.01], 8: [0.0, 0.30]}
    plan = plan_spread(cells)
    assert [a.key for a in plan.set_apart] == [8] and plan.pooled == (1, 2, 4)
    assert plan.of(8) == (pytest.approx(0.30 / math.sqrt(2)), 1)


def test_loads_with_no_spread_to_test_against_stay_pooled():
    plan = plan_spread({1: [0.1, 0.1], 2: [0.2, 0.2], 4: [0.0, 0.05]})
    assert plan.set_apart == ()


def test_a_load_set_apart_says_in_words_how_likely_its_spread_and_the_one_bar_shared_over_the_loads():
    from stackbook.analysis.spread_pool import POOLING_TEST_LEVEL, SetApart

    assert POOLING_TEST_LEVEL == 0.20
    three = SetApart(2, 63.2, 0.0154, POOLING_TEST_LEVEL / 3, 3).text()
    assert three == ("load 2's spread set apart (variance 63× the other loads': a 1.5% chance were it alike, under "
                     "the pooling test's bar of 20% shared over 3 loads, 6.7% each): its own repetitions only")
    assert "bar of 20% shared over 2 loads, 10% each" in _decisions(ODD)[4].method
