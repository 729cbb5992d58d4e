"""The known-effect control: the rule must rank a replica slowed by a known cost per token gap,
with the truth inside its interval; a known-delay arm is no A/A control."""
import math

import pandas as pd
import pytest
import yaml

from stackbook.analysis.comparison import controls
from stackbook.analysis.decision import COMPARED_BY_NAME, decide_pair
from stackbook.analysis.known_effect import known_effect_lines, true_ratio
from stackbook.config.campaign import Campaign

TPOT = COMPARED_BY_NAME["tpot_p50"]


def frame(fast: list[float], slow: list[float], load: float = 1) -> pd.DataFrame:
    rows = [{"arm": arm, "load": load, "repetition": r, "tpot_ms_p50": v}
            for arm, values in (("fast", fast), ("slow", slow)) for r, v in enumerate(values)]
    return pd.DataFrame(rows)


def test_the_true_ratio_is_the_baseline_plus_the_delay_over_the_baseline():
    assert true_ratio([40.0], 8, delayed_is_a=True) == pytest.approx(1.2)
    assert true_ratio([40.0], 8, delayed_is_a=False) == pytest.approx(1 / 1.2)
    # geometric mean over repetitions
    assert true_ratio([40.0, 20.0], 8, True) == pytest.approx(math.sqrt(1.2 * 1.4))


def test_a_found_effect_with_the_truth_inside_reads_found():
    fast, slow = [33.3, 32.8, 33.0], [41.2, 40.9, 41.1]
    d = decide_pair(1, TPOT, "fast", fast, 32, "slow", slow, 32, 0.05, 0.95, paired=True)
    assert d.decision == "ahead" and d.leader == "fast"
    [line] = known_effect_lines(frame(fast, slow), [d], {"slow": ("fast", 8.0)}, "concurrency")
    assert line.startswith("Known-effect control slow (fast plus 8 ms a token gap): found in all 1 comparison(s) "
                           "where the truth is known")
    assert f"against the true {true_ratio(fast, 8, False):.3f}" in line


def test_a_missed_effect_says_so_and_names_the_remedy():
    fast, slow = [33.3, 45.0], [41.2, 40.9]   # one odd repetition: undecided
    d = decide_pair(1, TPOT, "fast", fast, 32, "slow", slow, 32, 0.05, 0.95, paired=True)
    assert d.decision == "undecided"
    [line] = known_effect_lines(frame(fast, slow), [d], {"slow": ("fast", 8.0)}, "concurrency")
    assert "found in 0 of 1 comparison(s) where the truth is known; missed: concurrency 1, TPOT p50: undecided" in line
    assert "add repetitions" in line


def test_an_interval_that_misses_the_truth_is_not_counted_as_found():
    fast, slow = [30.0, 30.1, 29.9], [60.0, 60.2, 59.8]   # ranked, but twice slower, not +8 ms
    d = decide_pair(1, TPOT, "fast", fast, 32, "slow", slow, 32, 0.05, 0.95, paired=True)
    [line] = known_effect_lines(frame(fast, slow), [d], {"slow": ("fast", 8.0)}, "concurrency")
    assert "found in 0 of 1" in line and "(truth outside)" in line


CAMPAIGN = """
name: known
model: {source: embedded}
arms:
  - name: fast
    engine: {kind: llama_cpp}
  - name: again
    replicate_of: fast
  - name: slow
    replicate_of: fast
    known_delay: {tpot_ms: 8}
"""


def test_a_known_delay_replica_is_a_known_effect_control_not_an_aa_control():
    campaign = Campaign.model_validate(yaml.safe_load(CAMPAIGN))
    assert controls(campaign) == ({"again": "fast"}, {"slow": ("fast", 8.0)})


def test_a_managed_endpoint_cannot_carry_a_known_delay():
    text = CAMPAIGN.replace("{kind: llama_cpp}", "{kind: openai_endpoint, base_url: 'http://127.0.0.1:9/v1'}")
    with pytest.raises(ValueError, match="known_delay: kind 'openai_endpoint' cannot be relayed"):
        Campaign.model_validate(yaml.safe_load(text))


def test_above_one_client_in_a_closed_loop_the_truth_is_not_judged_but_an_open_loop_is():
    fast, slow = [45.0, 45.5, 48.8], [49.2, 55.4, 57.4]   # concurrency 2: the delay thinned the batch
    d = decide_pair(2, TPOT, "fast", fast, 40, "slow", slow, 40, 0.05, 0.95, paired=True)
    [closed] = known_effect_lines(frame(fast, slow, load=2), [d], {"slow": ("fast", 12.0)}, "concurrency")
    assert "no comparison at a load where the truth is known" in closed
    assert "At concurrency 2 the delay also thins the engine's batch" in closed
    [opened] = known_effect_lines(frame(fast, slow, load=2), [d], {"slow": ("fast", 12.0)}, "offered rate")
    assert "where the truth is known" in opened and "thins" not in opened
