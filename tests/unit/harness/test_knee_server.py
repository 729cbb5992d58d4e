"""The calibration server's knee mode over real HTTP: the load generator's TPOT follows
t0 + t1*b up to the knee and stays there past it, where TTFT takes the queue's wait."""
import statistics

import httpx
import pytest

from stackbook.harness.knee_scheduler import Knee, Lengths, simulate_closed_loop
from stackbook.loadgen.drivers import Target, run_closed_loop
from stackbook.loadgen.phases import Phase
from stackbook.loadgen.workload import ApproximateTokenizer, PromptSpec

KNEE = Knee(max_batch=4, t0_ms=20, t1_ms=10, admit_window_ms=3)
TOKENS = 6


def _point(server, concurrency: int):
    target = Target(server.base_url, "calibration", {}, {"max_tokens": TOKENS}, timeout_s=30)
    n = concurrency + max(8, 2 * concurrency)  # one warm-up per client, then at least 8 measured
    prompts = [PromptSpec(i, [{"role": "user", "content": f"c{concurrency} r{i}"}], 2) for i in range(n)]
    recs = run_closed_loop(target, prompts, ApproximateTokenizer(), concurrency=concurrency, warmup=concurrency,
                           writer=None, base={"run_id": "t", "arm": "cal", "point": "p", "concurrency": concurrency})
    measured = [r for r in recs if r.phase == Phase.MEASURE]
    assert len(measured) == n - concurrency and all(r.ok and r.output_tokens_server == TOKENS for r in measured)
    tpot = statistics.median((r.end_s - r.first_token_s) / (TOKENS - 1) * 1000 for r in measured)
    ttft = statistics.median((r.first_token_s - r.sent_s) * 1000 for r in measured)
    return tpot, ttft, httpx.get(server.base_url + "/knee", timeout=5).json()


def test_tpot_grows_with_the_batch_as_the_knee_predicts(start_calibration_server):
    server = start_calibration_server(knee=KNEE)
    tpots = {}
    for c in (1, 2, 4, 6):
        tpot, ttft, log = _point(server, c)
        tpots[c] = tpot
        predicted = {1: 30.0, 2: 40.0, 4: 60.0, 6: 60.0}[c]  # t0 + t1 * min(c, B), in ms
        assert tpot == pytest.approx(predicted, abs=4), (c, tpot, predicted)
        # The server's own record: the batch held min(c, B) while every client had a request out.
        batches = [b for _, b in log["steps"]]
        assert statistics.mode(batches) == min(c, KNEE.max_batch) and max(batches) == min(c, KNEE.max_batch)
        assert len(log["streams"]) == c + max(8, 2 * c) and all(len(s["sent"]) == TOKENS for s in log["streams"])
        if c <= KNEE.max_batch:
            assert ttft == pytest.approx(predicted, abs=5)
        else:  # past the knee TTFT carries the queue's wait, as the simulation of the same loop says
            sim = simulate_closed_loop(KNEE, c, 3 * c, Lengths(TOKENS)).timings[c:]
            assert ttft == pytest.approx(statistics.median(t.ttft_s for t in sim) * 1000, abs=8)
            assert ttft > 3 * predicted
    assert tpots[1] < tpots[2] < tpots[4]
    assert tpots[4] - tpots[1] == pytest.approx(3 * KNEE.t1_ms, abs=5)


def test_a_server_is_paced_or_knee_scheduled_not_both():
    from stackbook.harness.calibration_server import CalibrationServer
    from stackbook.harness.pacing import Pacing
    with pytest.raises(ValueError, match="not both"):
        CalibrationServer(pacing=Pacing(), knee=KNEE)
