"""The time to go, revised from the slots this host ran: each arm's own ratio for its later
slots, the host's (geometric mean) for arms not run yet."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stackbook.config.estimate import ArmEstimate
from stackbook.config.estimate_revision import SlotTime, host_ratio, own_ratios, revise

PLAN = {"a": ArmEstimate("a", 0, 0, "", overhead_s=60, per_repetition_s=100),
        "b": ArmEstimate("b", 0, 0, "", overhead_s=30, per_repetition_s=200)}


def test_an_arm_that_ran_keeps_its_own_ratio_and_the_others_take_the_hosts():
    done = [SlotTime("a", 0, 320.0)]                 # planned 160 s: this host is 2x slower for a
    r = revise(PLAN, done, [("b", 0), ("a", 1), ("b", 1)], elapsed_s=330.0, analysis_s=10.0)
    assert r.to_go_s == pytest.approx(10 + 230 * 2 + 100 * 2 + 200 * 2)
    assert r.total_s == pytest.approx(330 + r.to_go_s)
    assert r.after == "a, repetition 1"
    assert "a 2.00x" in r.basis and "b not run yet, scaled by 2.00x" in r.basis


def test_each_arm_its_own_ratio_once_both_ran():
    done = [SlotTime("a", 0, 80.0), SlotTime("b", 0, 460.0)]   # a 0.5x, b 2x
    assert own_ratios(PLAN, done) == {"a": 0.5, "b": 2.0}
    assert host_ratio(own_ratios(PLAN, done)) == pytest.approx(1.0)
    r = revise(PLAN, done, [("b", 1), ("a", 1)], elapsed_s=540.0, analysis_s=0.0)
    assert r.to_go_s == pytest.approx(200 * 2 + 100 * 0.5)


def test_a_slot_kept_from_an_earlier_attempt_does_not_count_as_this_hosts_time():
    done = [SlotTime("a", 0, 0.2)]
    assert own_ratios(PLAN, done) == {}
    r = revise(PLAN, done, [("b", 0)], elapsed_s=0.2, analysis_s=0.0)
    assert r.to_go_s == pytest.approx(230) and r.basis.startswith("the plan's own figures")


@given(st.lists(st.floats(0.01, 100.0), min_size=1, max_size=6))
def test_the_hosts_ratio_lies_between_the_arms_own(ratios):
    h = host_ratio(dict(enumerate(ratios)))
    assert min(ratios) * (1 - 1e-9) <= h <= max(ratios) * (1 + 1e-9)


def test_a_timed_start_up_leaves_the_sweeps_ratio_to_the_sweep():
    """a's first slot took 260 s, 100 of them its start-up: its sweep ran 1.6x the plan's 100 s.
    b's start-up still to come is the plan's 30 s at the host's 1.6x."""
    done = [SlotTime("a", 0, 260.0, startup_s=100.0)]
    assert own_ratios(PLAN, done) == {"a": pytest.approx(1.6)}
    r = revise(PLAN, done, [("b", 0), ("a", 1)], elapsed_s=260.0, analysis_s=0.0)
    assert r.to_go_s == pytest.approx(200 * 1.6 + 30 * 1.6 + 100 * 1.6)


def test_a_plan_with_no_start_up_takes_the_start_ups_timed_here():
    plan = {n: ArmEstimate(n, 0, 0, "", per_repetition_s=50) for n in ("a", "b")}
    done = [SlotTime("a", 0, 180.0, startup_s=80.0)]
    r = revise(plan, done, [("b", 0), ("b", 1)], elapsed_s=180.0, analysis_s=0.0)
    assert r.to_go_s == pytest.approx(50 * 2 + 80 + 50 * 2)


def test_the_rounds_counted_are_the_earlier_runs_inside_the_protocols_bounds():
    from stackbook.config.estimate import expected_rounds

    def plan(*seen):
        return {str(i): ArmEstimate(str(i), 0, 0, "", rounds_before=r) for i, r in enumerate(seen)}
    assert expected_rounds(plan(None, None), 2, 3) == 2     # nothing on record: the minimum
    assert expected_rounds(plan(3, 2), 2, 3) == 3           # the most any earlier run needed
    assert expected_rounds(plan(6), 2, 3) == 3 and expected_rounds(plan(1), 2, 3) == 2
