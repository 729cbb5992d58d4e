"""Metric definitions against hand-computed records."""
import pytest
from stackbook.config.protocol import Slo
from stackbook.loadgen.records import RecordWriter, read_records
from stackbook.measure.metrics import peer_definitions, point_summary, request_metrics

from tests.support.records import request_record


def rec(i, sent, first, end, n, chunks=None, error="none", phase="measure"):
    return request_record(point="c2-r0", phase=phase, concurrency=2, request_index=i, scheduled_s=sent, sent_s=sent,
                          first_token_s=first, end_s=end, chunk_times_s=chunks or [],
                          chunk_tokens=[1] * len(chunks or []), prompt_tokens_client=10, prompt_tokens_server=10,
                          output_tokens_server=n, output_tokens_client=n, output_tokens_requested=5,
                          finish_reason="length", error_class=error)


def test_request_metrics_by_hand():
    r = rec(0, sent=1.0, first=1.2, end=1.6, n=5, chunks=[1.2, 1.3, 1.4, 1.5, 1.6])
    m = request_metrics(r)
    assert m["ttft_ms"] == pytest.approx(200)
    assert m["e2e_ms"] == pytest.approx(600)
    assert m["tpot_ms"] == pytest.approx(100)        # (600 - 200) / (5 - 1)
    assert m["norm_e2e_ms"] == pytest.approx(120)    # 600 / 5
    assert m["itl_ms"] == pytest.approx([100, 100, 100, 100])


def test_point_summary_counts_failures_against_goodput():
    records = [
        rec(0, 0.0, 0.1, 0.5, 5, [0.1, 0.2, 0.3, 0.4, 0.5]),      # ttft 100, tpot 100: meets the SLO
        rec(1, 0.0, 0.9, 1.0, 5, [0.9, 0.925, 0.95, 0.975, 1.0]),  # ttft 900: misses the TTFT bound
        rec(2, 0.5, None, 2.0, 0, error="timeout"),                 # failed
        rec(3, 0.0, 0.05, 0.1, 5, [0.05, 0.1], phase="warmup"),     # excluded
    ]
    s = point_summary(records, Slo(ttft_ms=500, tpot_ms=150))
    assert s["requests"] == 3 and s["completed"] == 2
    assert s["errors"] == {"timeout": 1}
    assert s["window_s"] == pytest.approx(2.0)               # first send 0.0 to last end 2.0
    # Throughput counts what the workload's requests streamed inside the window: 5 + 5 tokens
    # measured, plus the warm-up's 2 that arrived after the first measured send.
    assert s["output_throughput_tok_s"] == pytest.approx(12 / 2.0)
    assert s["request_throughput_rps"] == pytest.approx(3 / 2.0)  # requests 0, 1 and the warm-up finished
    assert s["slo_attainment"] == pytest.approx(1 / 3)           # only request 0 met every bound
    assert s["goodput_rps"] == pytest.approx(3 / 2.0 / 3)
    # The load check counts the measured requests only; the engine also held the warm-up.
    assert s["in_flight_mean"] == pytest.approx((0.5 + 1.0 + 1.5) / 2.0)
    assert s["engine_in_flight_mean"] == pytest.approx((0.5 + 1.0 + 1.5 + 0.1) / 2.0)
    # Little's law over the same three: the failed one held its slot for 1.5 s too.
    assert s["littles_law_concurrency"] == pytest.approx(3 / 2.0 * (0.5 + 1.0 + 1.5) / 3) == s["in_flight_mean"]
    assert s["ttft_ms_p50"] == pytest.approx(500)            # median of 100 and 900
    assert s["length_not_honoured"] == 0
    # 95% CI half-width of the mean TTFT over two samples (100, 900): t(0.975, 1) x sd / sqrt(2)
    assert s["ttft_ms_ci95"] == pytest.approx(12.706 * 565.685 / 2 ** 0.5, rel=1e-3)


def test_throughput_is_the_workload_s_and_the_sentinels_are_counted_apart():
    """A closed loop at one: two measured requests of 4 tokens, a sentinel of 3 between them. The
    workload's throughput counts the two, the sentinel's figures the third, and the offered load
    (the rate sent, the requests in flight) counts all three, as the engine was offered them."""
    records = [
        rec(0, 0.0, 0.1, 0.4, 4, [0.1, 0.2, 0.3, 0.4]),
        rec(9, 0.5, 0.6, 0.8, 3, [0.6, 0.7, 0.8], phase="sentinel"),
        rec(1, 1.0, 1.1, 1.4, 4, [1.1, 1.2, 1.3, 1.4]),
    ]
    s = point_summary(records, Slo(ttft_ms=500, tpot_ms=150))
    assert s["window_s"] == pytest.approx(1.4)
    assert s["request_throughput_rps"] == pytest.approx(2 / 1.4)
    assert s["output_throughput_tok_s"] == pytest.approx(8 / 1.4)
    assert s["total_throughput_tok_s"] == pytest.approx((8 + 2 * 10) / 1.4)  # 10 prompt tokens each
    assert s["goodput_rps"] == pytest.approx(2 / 1.4)                          # both met the SLO
    assert (s["sentinel_requests"], s["sentinel_throughput_rps"], s["sentinel_output_throughput_tok_s"]) == (
        1, pytest.approx(1 / 1.4), pytest.approx(3 / 1.4))
    assert s["achieved_rate_rps"] == pytest.approx(2 / 1.0)                    # three sends over 1.0 s
    assert s["in_flight_mean"] == pytest.approx((0.4 + 0.3 + 0.4) / 1.4)
    # Without the sentinel the workload's figures are the same: it is no longer part of them.
    alone = point_summary([records[0], records[2]], Slo(ttft_ms=500, tpot_ms=150))
    assert alone["request_throughput_rps"] == s["request_throughput_rps"]
    assert (alone["sentinel_requests"], alone["sentinel_throughput_rps"]) == (0, 0.0)


def test_records_survive_a_torn_last_line(tmp_path):
    path = tmp_path / "requests.jsonl"
    with RecordWriter(path) as w:
        w.write(rec(0, 0, 0.1, 0.2, 5))
        w.write(rec(1, 0, 0.1, 0.2, 5))
    with open(path, "a") as f:
        f.write('{"run_id": "r", "arm": "a", "poi')           # a crash mid-write
    got = read_records(path)
    assert [r.request_index for r in got] == [0, 1]


def test_the_same_requests_under_each_tools_definitions():
    """Two requests, chunks of two tokens in the second: every tool's label computed by hand."""
    a = rec(0, sent=0.0, first=0.2, end=0.6, n=5, chunks=[0.2, 0.3, 0.4, 0.5, 0.6])
    a.first_event_s = 0.15                      # a role-only chunk came first
    b = rec(1, sent=1.0, first=1.1, end=1.5, n=5, chunks=[1.1, 1.3, 1.5])
    b.chunk_tokens = [1, 2, 2]
    b.output_tokens_client = 4                  # the client tokenizer counts one fewer
    t = peer_definitions([a, b])
    v = lambda tool, label, stat="mean": t.loc[(tool, label), stat]  # noqa: E731
    assert v("stackbook", "TTFT") == pytest.approx(150)                  # (200 + 100) / 2
    assert v("vllm bench serve", "TTFT") == pytest.approx(125)           # (150 + 100) / 2: first event
    # chunk gaps pooled: 4 x 100 from a, 2 x 200 from b
    assert v("vllm bench serve", "ITL") == pytest.approx(800 / 6)
    assert v("AIPerf", "ICL") == pytest.approx(800 / 6)
    assert v("stackbook", "TPOT") == pytest.approx((100 + 100) / 2)     # (400/4, 400/4)
    # GuideLLM ITL (last - first)/(N - 1): a 400/4 = 100, b 400/4 = 100
    assert v("GuideLLM", "ITL") == pytest.approx(100)
    # GuideLLM TPOT includes the first token: a 600/5 = 120, b 500/5 = 100
    assert v("GuideLLM", "TPOT") == pytest.approx(110)
    # AIPerf ITL divides by the client's count: a 400/4 = 100, b 400/3
    assert v("AIPerf", "ITL") == pytest.approx((100 + 400 / 3) / 2)
    assert v("vllm bench serve", "TTFT", "p50") == pytest.approx(125)


def test_weighted_percentiles_weight_by_tokens():
    """GuideLLM weights each request's ITL by its N - 1 tokens: the long request dominates p50."""
    short = rec(0, sent=0.0, first=0.1, end=0.2, n=2, chunks=[0.1, 0.2])          # ITL 100, weight 1
    long = rec(1, sent=0.0, first=0.1, end=1.1, n=51, chunks=[0.1 + i * 0.02 for i in range(51)])  # ITL 20, weight 50
    t = peer_definitions([short, long])
    assert t.loc[("GuideLLM", "ITL"), "p50"] == pytest.approx(20)
    assert t.loc[("GuideLLM", "ITL"), "mean"] == pytest.approx((100 + 20 * 50) / 51)


def test_length_control_ignores_requests_that_may_end_early():
    free = rec(0, 0.0, 0.1, 0.3, 3, [0.1, 0.2, 0.3])
    free.length_controlled = False
    forced = rec(1, 0.0, 0.1, 0.3, 3, [0.1, 0.2, 0.3])
    s = point_summary([free, forced], Slo())
    assert s["length_not_honoured"] == 1
