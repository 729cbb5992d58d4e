"""The rules that turn the fidelity benchmark's figures into verdicts."""
import pytest
from stackbook.harness.fidelity import highest_rate_held, server_lag_ms, verdicts


def test_server_lag_is_measured_against_the_best_aligned_schedule():
    # 10 req/s: arrivals on time except the third, 4 ms late; the whole run starts at t = 100 s
    arrivals = [100.0, 100.1, 100.204, 100.3]
    assert server_lag_ms(arrivals, 10) == pytest.approx([0, 0, 4, 0], abs=1e-6)
    # an early arrival moves the origin: the others are then late by as much
    assert server_lag_ms([100.0, 100.098, 100.2], 10) == pytest.approx([2, 0, 2], abs=1e-6)


def test_highest_rate_held_stops_at_the_first_failed_rung():
    ladder = [{"rate_rps": 100, "lag": 1.0, "err": 0}, {"rate_rps": 200, "lag": 4.9, "err": 0},
              {"rate_rps": 400, "lag": 6.0, "err": 0}, {"rate_rps": 800, "lag": 1.0, "err": 0}]
    assert highest_rate_held(ladder, "lag", "err") == 200
    ladder[1]["err"] = 1  # a failed request fails the rung whatever its lag
    assert highest_rate_held(ladder, "lag", "err") == 100
    assert highest_rate_held([{"rate_rps": 50, "lag": 9, "err": 0}], "lag", "err") == 0


def test_verdicts_apply_the_stated_goals():
    v = verdicts({"rate_held_ratio_stackbook_over_vllm_bench": 2.0,
                  "ttft_floor_ratio_stackbook_over_vllm_bench": 1.01,
                  "engine_median_ttft_ratio": 1.049, "engine_median_tpot_ratio": 0.949,
                  "stackbook_vs_engine_histogram_ttft_ratio": 1.2})
    assert v["rate_at_least_2x_vllm_bench"] is True
    assert v["ttft_floor_no_higher_than_vllm_bench"] is False
    assert v["engine_median_ttft_within_5pct"] is True
    assert v["engine_median_tpot_within_5pct"] is False
    assert v["ttft_mean_within_5pct_of_engine_histogram"] is False
    assert v["tpot_mean_within_5pct_of_engine_histogram"] is None  # not measured
