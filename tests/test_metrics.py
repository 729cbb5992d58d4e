"""Metric definitions against hand-computed records."""
import pytest

from stackbook.campaign import Slo
from stackbook.metrics import point_summary, request_metrics
from stackbook.records import RecordWriter, RequestRecord, read_records


def rec(i, sent, first, end, n, chunks=None, error="none", phase="measure"):
    return RequestRecord(run_id="r", arm="a", point="c2-r0", phase=phase, concurrency=2, request_index=i,
                         scheduled_s=sent, sent_s=sent, first_token_s=first, end_s=end, sent_unix=0.0,
                         chunk_times_s=chunks or [], chunk_tokens=[1] * len(chunks or []),
                         prompt_tokens_client=10, prompt_tokens_server=10, output_tokens_server=n,
                         output_tokens_client=n, output_tokens_requested=5, finish_reason="length",
                         error_class=error)


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
    # Throughput counts what streamed inside the window from every request of the point:
    # 5 + 5 tokens measured, plus the warm-up's 2 that arrived after the first measured send.
    assert s["output_throughput_tok_s"] == pytest.approx(12 / 2.0)
    assert s["request_throughput_rps"] == pytest.approx(3 / 2.0)  # requests 0, 1 and the warm-up finished
    assert s["slo_attainment"] == pytest.approx(1 / 3)           # only request 0 met every bound
    assert s["goodput_rps"] == pytest.approx(3 / 2.0 / 3)
    assert s["in_flight_mean"] == pytest.approx((0.5 + 1.0 + 1.5 + 0.1) / 2.0)
    assert s["ttft_ms_p50"] == pytest.approx(500)            # median of 100 and 900
    assert s["length_not_honoured"] == 0
    # 95% CI half-width of the mean TTFT over two samples (100, 900): t(0.975, 1) x sd / sqrt(2)
    assert s["ttft_ms_ci95"] == pytest.approx(12.706 * 565.685 / 2 ** 0.5, rel=1e-3)


def test_records_survive_a_torn_last_line(tmp_path):
    path = tmp_path / "requests.jsonl"
    with RecordWriter(path) as w:
        w.write(rec(0, 0, 0.1, 0.2, 5))
        w.write(rec(1, 0, 0.1, 0.2, 5))
    with open(path, "a") as f:
        f.write('{"run_id": "r", "arm": "a", "poi')           # a crash mid-write
    got = read_records(path)
    assert [r.request_index for r in got] == [0, 1]
