"""The delay relay: a known cost per token added to a stream, everything else relayed as it is.
Timings are asserted as lower bounds only (a held event is never released early; a busy host can
only make it later)."""
import time

import httpx
import pytest

from stackbook.harness.delay_relay import DelayRelay, is_token_event
from stackbook.harness.pacing import Pacing
from stackbook.loadgen.drivers import Target, run_closed_loop
from stackbook.loadgen.workload import ApproximateTokenizer, PromptSpec


@pytest.fixture
def relay_in_front(start_calibration_server):
    relays = []

    def start(tpot_ms: float, **server_options):
        server = start_calibration_server(**server_options)
        relay = DelayRelay(server.base_url, tpot_ms).start()
        relays.append(relay)
        return server, relay

    yield start
    for r in relays:
        r.stop()


def test_token_events_are_told_from_the_rest():
    assert is_token_event(b'data: {"choices": [{"delta": {"content": "hi"}}]}\n\n')
    assert not is_token_event(b'data: {"choices": [{"delta": {"role": "assistant"}}]}\n\n')
    assert not is_token_event(b'data: {"choices": [{"delta": {}, "finish_reason": "stop"}], "usage": {}}\n\n')
    assert not is_token_event(b"data: [DONE]\n\n")
    assert not is_token_event(b"event: ping\n\n")


def test_each_gap_grows_by_the_added_cost_and_the_answer_is_unchanged(relay_in_front):
    server, relay = relay_in_front(20, pacing=Pacing(ttft_ms=10, gap_ms=5))
    n = 10
    prompts = [PromptSpec(i, [{"role": "user", "content": f"stream {i}"}], 2) for i in range(2)]

    def run(base_url):
        target = Target(base_url, "calibration", {}, {"max_tokens": n}, timeout_s=30)
        return run_closed_loop(target, prompts, ApproximateTokenizer(), concurrency=1, warmup=0, writer=None,
                               base={"run_id": "t", "arm": "a", "point": "p", "concurrency": 1},
                               start=time.perf_counter())

    direct, relayed = run(server.base_url), run(relay.url)
    for d, r in zip(direct, relayed):
        assert r.ok and r.output_text == d.output_text and len(r.chunk_times_s) == n
        gaps = [b - a for a, b in zip(r.chunk_times_s, r.chunk_times_s[1:])]
        # The relay holds event k for k x 20 ms past its arrival, and the server spaced the events
        # 5 ms apart (less whatever its first send was late): the stream spans well over 9 x 20 ms.
        assert r.chunk_times_s[-1] - r.chunk_times_s[0] >= (n - 1) * (0.020 + 0.0025), gaps
    assert relay.held_events == 2 * (n - 1) and relay.streams == 2
    assert relay.record()["added_tpot_ms"] == 20


def test_other_routes_pass_through_unchanged(relay_in_front):
    server, relay = relay_in_front(8)
    with httpx.Client(timeout=10) as client:
        assert client.get(relay.url + "/health").json() == {"status": "ok"}
        assert "calibration_requests_total" in client.get(relay.url + "/metrics").text
        assert client.get(relay.url + "/nowhere").status_code == 404
        whole = client.post(relay.url + "/v1/chat/completions",
                            json={"model": "calibration", "messages": [{"role": "user", "content": "x"}],
                                  "max_tokens": 3})
        assert whole.status_code == 200 and whole.json()["choices"][0]["message"]["content"] == "tok tok tok "
        # the same kept-alive connection serves a stream after a whole reply
        with client.stream("POST", relay.url + "/v1/chat/completions",
                           json={"model": "calibration", "stream": True, "max_tokens": 4,
                                 "messages": [{"role": "user", "content": "x"}]}) as s:
            text = "".join(s.iter_text())
        assert text.count('"content": "tok "') == 4 and "[DONE]" in text


def test_only_a_plain_http_upstream_is_relayed():
    with pytest.raises(ValueError, match="http://host:port"):
        DelayRelay("https://example.com", 8)


def test_the_runners_relay_is_a_process_of_its_own_with_its_record_over_http(start_calibration_server):
    from stackbook.harness.delay_relay import RelayProcess

    server = start_calibration_server(pacing=Pacing(ttft_ms=5, gap_ms=2))
    relay = RelayProcess(server.base_url, 5).start()
    try:
        assert relay.url.startswith("http://127.0.0.1:") and relay.proc.poll() is None
        target = Target(relay.url, "calibration", {}, {"max_tokens": 4}, timeout_s=30)
        [rec] = run_closed_loop(target, [PromptSpec(0, [{"role": "user", "content": "x"}], 1)], ApproximateTokenizer(),
                                concurrency=1, warmup=0, writer=None,
                                base={"run_id": "t", "arm": "a", "point": "p", "concurrency": 1},
                                start=time.perf_counter())
        assert rec.ok and rec.chunk_times_s[-1] - rec.chunk_times_s[0] >= 3 * 0.005
        record = relay.record()
        assert record["added_tpot_ms"] == 5 and record["streams"] == 1 and record["held_token_events"] == 3
        assert record["release_late_ms"]["max"] >= 0 and record["release_late_ms"]["mean"] is not None
    finally:
        relay.stop()
    assert relay.proc.poll() is not None
