"""Each metric's one definition against hand-computed values, and the registry against the
formulas the figures were computed with before it."""
import pytest
from hypothesis import given
from hypothesis import strategies as st
from stackbook.loadgen.records import RequestRecord
from stackbook.measure.metric_definitions import (
    METRICS,
    achieved_rate_rps,
    e2e_ms,
    in_flight_mean,
    itl_ms,
    norm_e2e_ms,
    output_tokens,
    rate_rps,
    schedule_lag_ms,
    scheduled_rate_rps,
    tpot_ms,
    ttft_ms,
)


def rec(sent=1.0, first=1.2, end=2.0, chunks=(1.2, 1.5, 2.0), server=5, client=4, scheduled=0.99, index=0):
    return RequestRecord(run_id="r", arm="a", point="rate1-r0", phase="measure", concurrency=0, request_index=index,
                         scheduled_s=scheduled, sent_s=sent, first_token_s=first, end_s=end, sent_unix=0.0,
                         chunk_times_s=list(chunks), chunk_tokens=[1] * len(chunks), prompt_tokens_client=10,
                         output_tokens_server=server, output_tokens_client=client, output_tokens_requested=5)


def test_latencies_of_one_request_by_hand():
    r = rec()  # sent at 1.0 s, first token at 1.2 s, last byte at 2.0 s, 5 tokens by the server's count
    assert ttft_ms(r) == pytest.approx(200.0)             # ms: 1.2 - 1.0
    assert e2e_ms(r) == pytest.approx(1000.0)             # ms: 2.0 - 1.0
    assert tpot_ms(r) == pytest.approx(200.0)             # ms/token: (1000 - 200) / (5 - 1)
    assert norm_e2e_ms(r) == pytest.approx(200.0)         # ms/token: 1000 / 5
    assert itl_ms(r) == pytest.approx([300.0, 500.0])     # ms: 1.5 - 1.2, 2.0 - 1.5
    assert schedule_lag_ms(r) == pytest.approx(10.0)      # ms: 1.0 - 0.99


def test_output_tokens_prefer_the_servers_count():
    assert output_tokens(rec(server=5, client=4)) == 5
    assert output_tokens(rec(server=None, client=4)) == 4
    assert tpot_ms(rec(server=None, client=3)) == pytest.approx(400.0)  # (1000 - 200) / (3 - 1)


def test_undefined_latencies_are_none():
    assert ttft_ms(rec(first=None, chunks=())) is None
    assert tpot_ms(rec(first=None, chunks=())) is None
    assert tpot_ms(rec(server=1)) is None                 # one token: no gap after the first
    assert norm_e2e_ms(rec(server=0, client=0)) is None
    assert itl_ms(rec(chunks=(1.2,))) == []


def test_rates_from_timestamps_by_hand():
    # requests/s: 4 gaps over 2 s; the unsorted order does not matter
    assert rate_rps([0.0, 1.5, 0.5, 2.0, 1.0]) == pytest.approx(2.0)
    assert rate_rps([3.0]) is None and rate_rps([1.0, 1.0]) is None
    records = [rec(sent=s, scheduled=s - 0.01 * i, index=i) for i, s in enumerate([0.0, 0.5, 1.0])]
    assert achieved_rate_rps(records) == pytest.approx(2.0)            # 2 gaps over 1.0 s
    assert scheduled_rate_rps(records) == pytest.approx(2 / 0.98)      # 2 gaps over 0.98 s


def test_in_flight_by_hand():
    # requests: one in flight over the whole 2 s window, one for its second half -> 1.5 on average
    records = [rec(sent=0.0, first=0.1, end=2.0, chunks=(0.1,)), rec(sent=1.0, first=1.1, end=3.0, chunks=(1.1,))]
    assert in_flight_mean(records, 0.0, 2.0) == pytest.approx(1.5)
    assert in_flight_mean(records, 1.0, 1.0) is None


def test_the_registry_states_unit_and_dependencies_of_each_metric():
    assert {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "schedule_lag_ms", "achieved_rate_rps",
            "in_flight_mean"} <= set(METRICS)
    assert METRICS["ttft_ms"].unit == "ms" and METRICS["tpot_ms"].unit == "ms/token"
    assert METRICS["achieved_rate_rps"].unit == "requests/s"
    assert set(METRICS["tpot_ms"].depends_on) == {"ttft_ms", "e2e_ms", "output_tokens"}
    for m in METRICS.values():  # a dependency is a record field or another metric
        assert all(d in METRICS or d in RequestRecord.model_fields for d in m.depends_on), m.name
    assert METRICS["ttft_ms"].compute(rec()) == ttft_ms(rec())


times = st.floats(0, 1e4, allow_nan=False, allow_infinity=False)


@given(sent=times, ttft=st.floats(0, 60), rest=st.floats(0, 600), n=st.integers(0, 5000))
def test_registry_agrees_with_the_earlier_formulas(sent, ttft, rest, n):
    r = rec(sent=sent, first=sent + ttft, end=sent + ttft + rest, chunks=(), server=n)
    old_e2e = (r.end_s - r.sent_s) * 1000
    old_ttft = (r.first_token_s - r.sent_s) * 1000
    old_tpot = (old_e2e - old_ttft) / (n - 1) if n > 1 else None
    assert METRICS["e2e_ms"].compute(r) == old_e2e
    assert METRICS["ttft_ms"].compute(r) == old_ttft
    assert METRICS["tpot_ms"].compute(r) == old_tpot
