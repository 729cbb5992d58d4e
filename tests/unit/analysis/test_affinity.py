"""Where cache affinity stops paying: the crossover between a cache-aware router's tail and a
balancing one's, from hand-made tails whose answer is known, and its invariants under hypothesis;
the hotspot read from the imbalance over repetitions."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stackbook.analysis.affinity import HOTSPOT_IMBALANCE, Tail, crossover, difference_bracket, hotspots, ordered


def tail(x: float, half: float = 10.0) -> Tail:
    return Tail(x, x - half, x + half, 80)


def test_the_crossing_is_interpolated_between_the_loads_and_bracketed_by_the_intervals():
    affinity = {1.0: tail(100), 2.0: tail(200), 4.0: tail(500)}
    balanced = {1.0: tail(150), 2.0: tail(240), 4.0: tail(400)}
    found = crossover(affinity, balanced, ("ca", "rr"))
    # differences -50, -40, +100: the estimates cross between 2 and 4, at 2 + 2 x 40/140
    assert found["status"] == "crossed" and found["between"] == [2.0, 4.0]
    assert found["at_load"] == pytest.approx(2 + 2 * 40 / 140)
    assert [r["ordered"] for r in found["per_load"]] == ["ahead", "ahead", "behind"]
    assert found["interval"] == [2.0, 4.0]
    assert "near load 2.57 by the estimates (between 2 and 4; from the intervals, between 2 and 4)" in found["text"]


def test_overlapping_tails_leave_the_crossing_unbounded_on_that_side():
    affinity = {2.0: tail(100, 60), 4.0: tail(300, 60)}
    balanced = {2.0: tail(150, 60), 4.0: tail(250, 60)}
    found = crossover(affinity, balanced)
    assert found["status"] == "crossed" and found["interval"] == [None, None]
    assert "the intervals order the tails at no load swept, so they do not place it" in found["text"]


def test_no_crossing_up_to_the_heaviest_load_says_so_with_the_figures():
    found = crossover({2.0: tail(100), 4.0: tail(200)}, {2.0: tail(150), 4.0: tail(260)}, ("ca", "rr"))
    assert found["status"] == "no crossing" and found["up_to"] == 4.0 and found["interval"] == [4.0, None]
    assert found["text"].startswith("TTFT p90: no crossing up to load 4: ca's tail is lower at every load swept")
    assert "at 4 ca 200 [190, 210] ms on 80 against rr 260 [250, 270] ms on 80, ca lower" in found["text"]


def test_affinity_never_ahead_is_said_from_the_lightest_load():
    found = crossover({2.0: tail(200), 4.0: tail(300)}, {2.0: tail(150), 4.0: tail(250)})
    assert found["status"] == "never ahead" and found["interval"] == [None, 2.0]


def test_unbounded_tail_sides_leave_the_pair_not_ordered():
    a, b = Tail(100, 90, None, 20), Tail(300, 280, 320, 20)
    assert difference_bracket(a, b) == (90 - 320, None) and ordered(a, b) == "not ordered"
    assert crossover({1.0: a}, {}) ["status"] == "not measured"


def test_hotspot_from_the_first_load_every_repetition_reads_it():
    found = hotspots({2.0: [1.1, 1.3], 4.0: [1.3, 1.5], 8.0: [1.2, 1.6]})
    assert [r["hotspot"] for r in found["per_load"]] == [False, True, False]
    assert found["hotspot_from_load"] == 4.0 and found["hotspot_loads"] == [4.0]
    assert found["threshold"] == HOTSPOT_IMBALANCE
    row = found["per_load"][1]
    assert (row["mean"], row["min"], row["max"], row["repetitions"]) == (pytest.approx(1.4), 1.3, 1.5, 2)
    assert row["lo"] < 1.4 < row["hi"]
    assert hotspots({2.0: [1.0, 1.0]})["hotspot_from_load"] is None


# quarter-millisecond steps: exact in binary, so a shift by 7 keeps every difference's sign
values = st.integers(40, 4000).map(lambda v: v / 4)
series = st.lists(st.tuples(values, values, st.floats(0, 50), st.floats(0, 50)), min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(series)
def test_the_crossing_lies_inside_its_interval_and_the_status_follows_the_estimates(points):
    loads = [float(2 ** i) for i in range(len(points))]
    affinity = {ld: tail(a, ha) for ld, (a, _, ha, _) in zip(loads, points)}
    balanced = {ld: tail(b, hb) for ld, (_, b, _, hb) in zip(loads, points)}
    found = crossover(affinity, balanced)
    d = [a - b for a, b, _, _ in points]
    if d[0] >= 0:
        assert found["status"] == "never ahead"
    elif all(x < 0 for x in d):
        assert found["status"] == "no crossing" and found["up_to"] == loads[-1]
    else:
        assert found["status"] == "crossed"
        lo, hi = found["interval"]
        before, after = found["between"]
        assert before <= found["at_load"] <= after
        assert lo is None or lo <= found["at_load"]
        assert hi is None or found["at_load"] <= hi
    # shifting both policies' tails alike changes nothing
    shifted = crossover({k: tail(v.estimate + 7, v.hi - v.estimate) for k, v in affinity.items()},
                        {k: tail(v.estimate + 7, v.hi - v.estimate) for k, v in balanced.items()})
    assert shifted["status"] == found["status"] and shifted.get("at_load") == pytest.approx(found.get("at_load"))
