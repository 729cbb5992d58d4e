"""The campaign's progress bar counts the steps it runs: per arm, the first slot's engine start and
three notebooks, and each later repetition's engine start and sweep, then the analysis. The
quickstart's bar once read "12step" over a total of 11 and ran 13."""
from stackbook.arm_run import campaign_steps, slot_steps


def test_the_bar_total_is_the_steps_the_slots_count():
    assert (slot_steps(True), slot_steps(False)) == (4, 2)
    assert campaign_steps(2, 2) == 13  # the quickstart: two arms, two repetitions
    assert campaign_steps(1, 2) == 7 and campaign_steps(3, 1) == 13
