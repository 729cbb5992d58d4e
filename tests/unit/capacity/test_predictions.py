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
    assert ladder_rungs({"start": 1, "tolerance": 1}, 5) == 5
    assert ladder_rungs({"start": 1, "tolerance": 1}, None) is None


def _arm(points: dict, slo: dict | None = None) -> dict:
    """An arm's results as prediction_rows reads them: llama.cpp-like sizing (8 slots configured,
    a host-sized pool holding 507 sequences), a closed-loop sweep, the search's SLO and plan."""
    sizing = {"max_live_sequences": 507, "bytes_per_sequence": 45 * 2**20, "cache_pool_bytes": 507 * 45 * 2**20,
              "cache_pool_source": "derived: memory - weights - workspace - activations", "context": 2048,
              "predicted_capacity": {"max_concurrency": 8, "rule": "-c = context x slots"},
              "realized_capacity": {"max_concurrency": 8}}
    sweep = {"points": {name: {"concurrency": c, "e2e_ms_mean": e2e, "request_throughput_rps": x,
                               "output_tokens": 160, "completed": 10} for name, (c, e2e, x) in points.items()}}
    slo = slo or {"ttft_ms": 1000.0, "tpot_ms": 100.0, "e2e_ms": 2300.0, "attainment": 0.9}
    return {"results": {"sizing": sizing, "sweep": sweep, "capacity": {"slo": slo, "plan": {"max_load": 16}}}}


def _by_name(rows: list[dict]) -> dict:
    return {r["prediction"]: r for r in rows}


def test_the_memory_bound_is_the_memory_arithmetic_and_the_slot_count_the_engine_s_own_limit():
    from stackbook.analysis.capacity_summary import prediction_rows

    rows = _by_name(prediction_rows("a", _arm({"c1-r0": (1, 500, 1.5), "c2-r0": (2, 800, 2.5)}), None, 3, 4))
    memory = rows["sizing: live sequences the pool holds"]
    assert memory["predicted"] == 507 and memory["error"] == pytest.approx(507 / 3 - 1)
    assert memory["basis"].startswith("arithmetic: cache pool 22.3 GiB (derived: memory - weights - workspace - "
                                      "activations) / 45.0 MiB of one sequence at the protocol's context of 2048")
    assert rows["engine: live sequences it allows"]["predicted"] == 8
    unsized = _arm({"c1-r0": (1, 500, 1.5)})
    unsized["results"]["sizing"] = {}
    assert _by_name(prediction_rows("a", unsized, None, 3, 4))["sizing: live sequences the pool holds"][
        "predicted"] is None


def test_the_fitted_mva_is_named_for_the_loads_it_was_fitted_on():
    """Throughput growing to 2.5 req/s at concurrency 2: D = 1/2.5 = 0.4 s at the bottleneck and
    0.5 - 0.4 = 0.1 s of delay, so by exact MVA R(5) = 2.0 s and R(6) = 2.4 s: 5 within 2300 ms.
    Throughput highest at concurrency 1 (2.0 req/s): both ends from that load, one queue of
    0.5 s, R(n) = 0.5 n s: 4 within 2300 ms, and the name and basis say it came from one load."""
    from stackbook.analysis.capacity_summary import prediction_rows

    two = _by_name(prediction_rows("a", _arm({"c1-r0": (1, 500, 1.5), "c2-r0": (2, 800, 2.5)}), None, 3, 4))
    fitted = two["MVA fitted on two loads"]
    assert fitted["predicted"] == 5 and "from c1-r0 and saturation throughput from c2-r0" in fitted["basis"]
    one = _by_name(prediction_rows("a", _arm({"c1-r0": (1, 500, 2.0), "c2-r0": (2, 1100, 1.8)}), None, 3, 4))
    assert "MVA fitted on two loads" not in one
    fitted = one["MVA fitted from one load"]
    assert fitted["predicted"] == 4
    assert fitted["basis"].startswith("one-load MVA: the throughput was highest at the lightest load swept (c1-r0, "
                                      "2 req/s; the heavier loads reached at most 1.8)")
    for row in (two["MVA fitted on two loads"], fitted):
        assert row["basis"].endswith("within 2300 ms (the SLO's E2E bound): a mean held to a bound the SLO sets "
                                     "for 90% of requests, not the percentile itself")


def test_a_mean_set_against_a_percentile_bound_says_so():
    from stackbook.analysis.capacity_summary import mean_against_percentile

    words = mean_against_percentile({"ttft_ms": 1000.0, "tpot_ms": 100.0, "e2e_ms": None, "attainment": 0.9}, 2500)
    assert words == ("the largest concurrency whose mean E2E stays within 2500 ms (TTFT ≤ 1000 ms plus TPOT ≤ "
                     "100 ms for each token after the first): a mean held to a bound the SLO sets for 90% of "
                     "requests, not the percentile itself")
