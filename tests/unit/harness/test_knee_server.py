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


def test_the_batch_follows_the_knee_and_the_client_sees_it(start_calibration_server):
    """The server's own record decides: the batch held min(c, B) while every client had a request
    out. The client's figures are checked only for direction, with a wide margin (how closely
    they match t0 + t1*b on a quiet host is the benchmark's figure, not a test's)."""
    server = start_calibration_server(knee=KNEE)
    tpots, ttfts = {}, {}
    for c in (1, 2, 4, 6):
        tpots[c], ttfts[c], log = _point(server, c)
        batches = [b for _, b in log["steps"]]
        assert statistics.mode(batches) == min(c, KNEE.max_batch) and max(batches) == min(c, KNEE.max_batch)
        assert len(log["streams"]) == c + max(8, 2 * c) and all(len(s["sent"]) == TOKENS for s in log["streams"])
    # t0 + t1*b: 30 ms a token alone, 60 ms at the knee (a host's stalls slow both, not one).
    assert tpots[1] < tpots[4]
    # Past the knee two clients wait for a slot: TTFT carries the queue (230 ms by the simulation
    # of this loop, against 60 ms with no queue).
    sim = simulate_closed_loop(KNEE, 6, 18, Lengths(TOKENS)).timings[6:]
    assert statistics.median(t.ttft_s for t in sim) * 1000 > 3 * (KNEE.t0_ms + KNEE.t1_ms * KNEE.max_batch)
    assert ttfts[6] > 2 * ttfts[1]


def test_a_server_is_paced_or_knee_scheduled_not_both():
    from stackbook.harness.calibration_server import CalibrationServer
    from stackbook.harness.pacing import Pacing
    with pytest.raises(ValueError, match="not both"):
        CalibrationServer(pacing=Pacing(), knee=KNEE)
