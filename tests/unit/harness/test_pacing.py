"""The paced calibration server: each stream's events at its known TTFT and gap, every send
recorded, and the client's timings against that truth."""
import random
import statistics

import httpx
import pytest
from typer.testing import CliRunner

from stackbook.cli import app
from stackbook.harness.pacing import Pacing
from stackbook.harness.stream_fidelity import distortion, paced_log, truth_of
from stackbook.loadgen.drivers import Target, run_closed_loop
from stackbook.loadgen.workload import ApproximateTokenizer, PromptSpec


def test_deadlines_keep_the_ttft_and_the_mean_gap():
    rng = random.Random(1)
    exact = Pacing(ttft_ms=50, gap_ms=10).deadlines(100.0, 5, rng)
    assert exact == pytest.approx([100.05, 100.06, 100.07, 100.08, 100.09])
    for jitter in ("uniform", "normal", "exponential"):
        d = Pacing(ttft_ms=50, gap_ms=10, jitter=jitter, jitter_ms=3).deadlines(0.0, 4001, rng)
        gaps = [b - a for a, b in zip(d, d[1:])]
        assert min(gaps) >= 0 and statistics.mean(gaps) == pytest.approx(0.010, rel=0.03), jitter
        assert statistics.pstdev(gaps) > 0.001, jitter


def test_a_paced_stream_is_sent_on_time_and_the_client_sees_the_truth(start_calibration_server):
    server = start_calibration_server(pacing=Pacing(ttft_ms=30, gap_ms=5))
    target = Target(server.base_url, "calibration", {}, {"max_tokens": 12}, timeout_s=30)
    prompts = [PromptSpec(i, [{"role": "user", "content": f"stream {i}"}], 2) for i in range(8)]
    import time
    start = time.perf_counter()
    recs = run_closed_loop(target, prompts, ApproximateTokenizer(), concurrency=4, warmup=4, writer=None,
                           base={"run_id": "t", "arm": "cal", "point": "p", "concurrency": 4}, start=start)
    log = paced_log(server.base_url)
    assert paced_log(server.base_url) == {}  # read once, then forgotten
    assert sorted(log) == sorted(f"stream {i}" for i in range(8))
    for stream in log.values():
        # Never early (a busy host may make it late: the truth is what was sent, and when).
        assert len(stream["sent"]) == 12 and truth_of(stream)["ttft_ms"] >= 29.5
        assert all(sent >= due - 0.0006 for sent, due in zip(stream["sent"], stream["due"]))
    d = distortion(recs, log, start)
    assert d["requests"] == 4 and all(r.output_tokens_server == 12 for r in recs)
    # The client's clock and the server's are one: its stamps follow the sends within milliseconds.
    assert -0.1 < d["receive_delay_ms_p50"] < 5 and abs(d["error_ms"]["ttft_ms_p50"]) < 5
    assert abs(d["error_ms"]["tpot_ms_p50"]) < 0.5


def test_an_unpaced_request_and_a_misbehaving_mode_still_answer_at_once(start_calibration_server):
    server = start_calibration_server(pacing=Pacing(ttft_ms=500, gap_ms=100))
    r = httpx.post(server.base_url + "/v1/chat/completions", timeout=5,
                   json={"model": "calibration", "messages": [{"role": "user", "content": "x"}], "max_tokens": 2})
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 2
    r = httpx.post(server.base_url + "/v1/chat/completions", timeout=5,
                   json={"model": "calibration-http_429", "messages": [], "stream": True})
    assert r.status_code == 429


def test_selftest_streams_prints_each_point_beside_the_truth():
    result = CliRunner().invoke(app, ["selftest", "--streams", "4"])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[0].startswith("truth: TTFT 50 ms, inter-token gap 10 ms, 128 tokens per stream")
    assert lines[2].startswith("4 x 1 | ")


def test_selftest_streams_names_the_bad_value():
    result = CliRunner().invoke(app, ["selftest", "--streams", "16,lots"])
    assert (result.exit_code == 2 and "--streams '16,lots'" in result.output
            and "e.g. --streams 16,64,256" in result.output)
    result = CliRunner().invoke(app, ["selftest", "--streams", "0"])
    assert result.exit_code == 2 and "at least 1" in result.output
