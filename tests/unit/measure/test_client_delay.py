"""The preregistered client-delay rule: a point whose load generator's own event-loop delay could
move its TTFT or TPOT by more than MAX_CLIENT_DELAY_SHARE is invalid. Provoked with a loop kept
busy on purpose against the paced calibration server, and shown to hold without it."""
import asyncio
import time

import pytest

from stackbook.config.protocol import Slo
from stackbook.harness.pacing import Pacing
from stackbook.loadgen.drivers import Target, closed_loop, collector_paused, run_sync
from stackbook.loadgen.http_client import kernel_stamped
from stackbook.loadgen.loop_lag import LoopLag
from stackbook.loadgen.workload import ApproximateTokenizer, PromptSpec
from stackbook.measure.metrics import point_summary
from stackbook.measure.validity import (
    MAX_CLIENT_DELAY_SHARE,
    client_delay_validity,
    with_client_delay,
)


def test_the_shares_are_the_delay_against_the_median_ttft_and_the_stream_decode_time():
    s = {"client_loop_delay_ms_p99": 4.0, "ttft_ms_p50": 200.0, "tpot_ms_p50": 10.0, "output_tokens": 330,
         "completed": 10}
    v = client_delay_validity(s)
    assert v["client_delay_ttft_share"] == 0.02 and v["client_delay_tpot_share"] == pytest.approx(4 / 320)
    assert v["client_delay_valid"] is True
    late = client_delay_validity(s | {"ttft_ms_p50": 40.0})  # 4 ms is a tenth of a 40 ms TTFT
    assert late["client_delay_ttft_share"] == 0.1 and late["client_delay_valid"] is False
    # Under a millisecond is the harness's own resolution; an older run without a probe is not judged.
    assert client_delay_validity(s | {"client_loop_delay_ms_p99": 0.9, "ttft_ms_p50": 1.0})["client_delay_valid"]
    assert client_delay_validity({"ttft_ms_p50": 1.0})["client_delay_valid"] is True
    # Under kernel stamps a late read moves a first token by at most the reply's span after it:
    # a 20 ms wait beside a 0.5 ms reply (the zero-latency server) moves it by 0.1 ms at most.
    fast = {"client_loop_delay_ms_p99": 20.0, "ttft_ms_p50": 0.4, "e2e_ms_p50": 0.5, "tpot_ms_p50": 0.03,
            "output_tokens": 40, "completed": 10}
    assert client_delay_validity(fast)["client_delay_valid"] is False
    bounded = client_delay_validity(fast | {"client_kernel_stamps": True})
    assert bounded["client_delay_judged_ms"] == pytest.approx(0.1) and bounded["client_delay_valid"] is True
    # The rule joins the load check: both must hold.
    assert with_client_delay({"valid": True}, s | {"ttft_ms_p50": 40.0})["valid"] is False
    assert with_client_delay({"valid": False}, s)["valid"] is False
    assert with_client_delay({"valid": True}, s)["valid"] is True


@pytest.fixture(scope="module")
def paced(start_module_calibration_server):
    return start_module_calibration_server(pacing=Pacing(ttft_ms=200, gap_ms=5))


@pytest.fixture(scope="module")
def slow_paced(start_module_calibration_server):
    """A TTFT (1 s) and streams (64 tokens, 10 ms apart) long enough that a busy host's own
    delays stay a small share of both."""
    return start_module_calibration_server(pacing=Pacing(ttft_ms=1000, gap_ms=10))


def _point(url: str, busy_ms: float | None, tokens: int = 8) -> dict:
    """Two rounds of eight streams from one loop; with `busy_ms`, a task on the same loop holds
    it for that long in every 40 ms (a client doing work of its own on the receiving path)."""
    target = Target(url, "calibration", {}, {"max_tokens": tokens}, timeout_s=30)
    prompts = [PromptSpec(i, [{"role": "user", "content": f"calibrate {i}"}], 1) for i in range(16)]
    probe = LoopLag()

    async def hog(stop: asyncio.Event) -> None:
        while not stop.is_set():
            until = time.perf_counter() + busy_ms / 1000
            while time.perf_counter() < until:
                pass
            await asyncio.sleep(0.040 - busy_ms / 1000)

    async def main():
        stop = asyncio.Event()
        side = asyncio.create_task(hog(stop)) if busy_ms else None
        recs = await closed_loop(target, prompts, ApproximateTokenizer(), concurrency=8, warmup=0, writer=None,
                                 base={"run_id": "t", "arm": "cal", "point": "p", "concurrency": 8}, probe=probe)
        stop.set()
        if side:
            await side
        return recs

    with collector_paused():
        recs = run_sync(main())
    assert len(recs) == 16 and all(r.ok for r in recs)
    return point_summary(recs, Slo()) | {f"client_{k}": v for k, v in probe.summary().items()} | {
        "client_kernel_stamps": kernel_stamped(url)}


def test_a_busy_client_loop_invalidates_the_point(paced):
    s = _point(paced.base_url, busy_ms=30)
    v = with_client_delay({"valid": True}, s)
    assert s["client_loop_delay_ms_p99"] > 15  # the probe saw the loop held
    assert v["client_delay_ttft_share"] > MAX_CLIENT_DELAY_SHARE and v["valid"] is False


def test_a_free_client_loop_keeps_the_point_valid(slow_paced):
    s = _point(slow_paced.base_url, busy_ms=None, tokens=64)
    v = with_client_delay({"valid": True}, s)
    assert s["client_loop_delay_samples"] > 200
    assert s["ttft_ms_p50"] > 900  # the server holds each first token about a second (stamps may read it a hair short)
    assert v["client_delay_ttft_share"] <= MAX_CLIENT_DELAY_SHARE and v["valid"] is True
