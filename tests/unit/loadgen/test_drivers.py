"""The load generator against the calibration server (a zero-latency instrument, not an engine):
arrival statistics, absolute deadlines, and every error class it must tell apart."""
import statistics

import pytest
from stackbook.loadgen import arrivals
from stackbook.loadgen.drivers import Target, run_closed_loop, run_open_loop
from stackbook.loadgen.records import RecordWriter, read_records
from stackbook.loadgen.workload import ApproximateTokenizer, PromptSpec

TOK = ApproximateTokenizer()


@pytest.fixture(scope="module")
def server(start_module_calibration_server):
    return start_module_calibration_server(slow_headers_s=3.0)


def prompts(n):
    return [PromptSpec(i, [{"role": "user", "content": "x"}], 1) for i in range(n)]


def base(point="p", c=1):
    return {"run_id": "t", "arm": "cal", "point": point, "concurrency": c}


# -- arrival processes -----------------------------------------------------------------------

def interarrival_cv(schedule: list[float]) -> float:
    """Coefficient of variation of the gaps between sends (1 for Poisson, 0 for constant)."""
    gaps = [b - a for a, b in zip(schedule, schedule[1:])]
    mean = sum(gaps) / len(gaps)
    return (sum((g - mean) ** 2 for g in gaps) / (len(gaps) - 1)) ** 0.5 / mean


def test_poisson_rate_and_cv():
    s = arrivals.poisson_schedule(10.0, 20_000, seed=1)
    assert (len(s) - 1) / s[-1] == pytest.approx(10.0, rel=0.03)
    assert interarrival_cv(s) == pytest.approx(1.0, abs=0.03)


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_gamma_burstiness_is_the_squared_cv(burstiness):
    s = arrivals.gamma_schedule(5.0, 20_000, burstiness, seed=2)
    assert (len(s) - 1) / s[-1] == pytest.approx(5.0, rel=0.05)
    assert interarrival_cv(s) ** 2 == pytest.approx(burstiness, rel=0.08)


def test_constant_schedule_is_exact():
    assert arrivals.constant_schedule(4.0, 5) == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert interarrival_cv(arrivals.constant_schedule(4.0, 50)) == pytest.approx(0.0, abs=1e-9)


def test_seeded_schedules_repeat_and_differ():
    assert arrivals.poisson_schedule(3, 50, 7) == arrivals.poisson_schedule(3, 50, 7)
    assert arrivals.poisson_schedule(3, 50, 7) != arrivals.poisson_schedule(3, 50, 8)


def test_trace_reader(tmp_path):
    from stackbook.loadgen.trace_formats import TraceRequest, read_trace_file

    p = tmp_path / "t.csv"
    p.write_text("timestamp_s,prompt_tokens,output_tokens\n10.5,100,20\n10.0,50,10\n")
    assert read_trace_file(p).requests == [TraceRequest(0.0, 50, 10), TraceRequest(0.5, 100, 20)]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp_s": 1}\n')
    with pytest.raises(ValueError, match="line 1, field prompt_tokens: Field required"):
        read_trace_file(bad)


# -- the client against the calibration server ---------------------------------------------

def test_open_loop_keeps_absolute_deadlines(server):
    t = Target(server.base_url, "calibration", {"temperature": 0}, {"max_tokens": 4})
    sched = arrivals.constant_schedule(20.0, 30)
    recs = run_open_loop(t, prompts(30), TOK, schedule=sched, warmup=0, writer=None, base=base())
    assert all(r.ok for r in recs)
    assert sorted(r.scheduled_s for r in recs) == sched
    lags = [r.sent_s - r.scheduled_s for r in recs]
    assert min(lags) >= -1e-4              # never early
    assert statistics.median(lags) < 0.02   # and not drifting: the last send is as punctual as the first
    last = max(recs, key=lambda r: r.scheduled_s)
    assert last.sent_s - last.scheduled_s < 0.05


def test_closed_loop_records_every_chunk_and_phase(server, tmp_path):
    t = Target(server.base_url, "calibration", {"temperature": 0}, {"max_tokens": 8})
    with RecordWriter(tmp_path / "r.jsonl") as w:
        run_closed_loop(t, prompts(10), TOK, concurrency=3, warmup=2, cooldown=2, writer=w, base=base(c=3))
    recs = read_records(tmp_path / "r.jsonl")
    assert [r.phase for r in sorted(recs, key=lambda r: r.request_index)] == \
        ["warmup"] * 2 + ["measure"] * 6 + ["cooldown"] * 2
    for r in recs:
        assert r.output_tokens_server == 8 and len(r.chunk_times_s) == 8 and sum(r.chunk_tokens) == 8
        assert r.sent_s <= r.first_token_s <= r.end_s and r.finish_reason == "length"


@pytest.mark.parametrize("mode, error_class", [
    ("http_429", "admission_rejected"),
    ("http_503", "admission_rejected"),
    ("malformed_sse", "malformed_stream"),
    ("invalid_json", "malformed_stream"),
    ("truncated", "transport"),
    ("error_event", "admission_rejected"),
])
def test_bad_responses_are_classified_not_crashes(server, mode, error_class):
    t = Target(server.base_url, f"calibration-{mode}", {"temperature": 0}, {"max_tokens": 8}, timeout_s=5)
    rec = run_closed_loop(t, prompts(1), TOK, concurrency=1, warmup=0, writer=None, base=base())[0]
    assert rec.error_class == error_class, rec.error
    assert rec.error


def test_slow_headers_time_out(server):
    t = Target(server.base_url, "calibration-slow_headers", {"temperature": 0}, {"max_tokens": 4}, timeout_s=0.5)
    rec = run_closed_loop(t, prompts(1), TOK, concurrency=1, warmup=0, writer=None, base=base())[0]
    assert rec.error_class == "timeout"


def test_a_closed_loop_stops_at_an_engine_that_answers_none_of_its_first_requests(server):
    """Two clients, ten prompts, an endpoint whose headers never come within the timeout: the
    clients stop once two in a row have timed out (the other client ends the request it holds), where
    each in turn would have waited out its own timeout; an endpoint that answers gets every prompt."""
    t = Target(server.base_url, "calibration-slow_headers", {"temperature": 0}, {"max_tokens": 4}, timeout_s=0.5)
    recs = run_closed_loop(t, prompts(10), TOK, concurrency=2, warmup=0, writer=None, base=base(c=2))
    assert 2 <= len(recs) <= 3 and {r.error_class for r in recs} == {"timeout"}
    from stackbook.measure.sweep import not_answered
    assert not_answered(recs)
    ok = Target(server.base_url, "calibration", {"temperature": 0}, {"max_tokens": 4}, timeout_s=5)
    assert len(run_closed_loop(ok, prompts(10), TOK, concurrency=2, warmup=0, writer=None, base=base(c=2))) == 10


def test_connection_refused_is_a_transport_error():
    from stackbook.engines.spec import free_port
    t = Target(f"http://127.0.0.1:{free_port()}", "x", {}, {"max_tokens": 4}, timeout_s=2)
    rec = run_closed_loop(t, prompts(1), TOK, concurrency=1, warmup=0, writer=None, base=base())[0]
    assert rec.error_class == "transport" and "Connect" in rec.error


def test_api_key_is_sent_as_bearer(start_calibration_server):
    s = start_calibration_server(api_key="sk-test-123")
    bad = Target(s.base_url, "calibration", {}, {"max_tokens": 2})
    assert run_closed_loop(bad, prompts(1), TOK, concurrency=1, warmup=0, writer=None, base=base())[0].status == 401
    good = Target(s.base_url, "calibration", {}, {"max_tokens": 2}, headers={"Authorization": "Bearer sk-test-123"})
    assert run_closed_loop(good, prompts(1), TOK, concurrency=1, warmup=0, writer=None, base=base())[0].ok


def test_engine_gauges_are_sampled_while_the_load_runs(start_calibration_server):
    """The gauge sampler (a separate process) sees requests in flight during an open-loop burst
    of slow replies, and nothing once they are done."""
    import time

    from stackbook.measure.telemetry import GaugeSampler
    server = start_calibration_server(slow_headers_s=1.0)
    t = Target(server.base_url, "calibration-slow_headers", {"temperature": 0.0}, {"max_tokens": 4}, timeout_s=10)
    def wait_for_a_sample(since: float) -> None:
        """On a busy host the sampling process starts late: wait for its sample, not a fixed time."""
        deadline = time.time() + 30
        while gauges.window(since, time.time()).get("samples", 0) < 1 and time.time() < deadline:
            time.sleep(0.1)

    with GaugeSampler(server.base_url, "/metrics", interval_s=0.2) as gauges:
        wait_for_a_sample(time.time())
        start = time.time()
        recs = run_open_loop(t, prompts(5), TOK, schedule=[0.0, 0.05, 0.1, 0.15, 0.2], warmup=0, writer=None,
                             base=base("gauges"))
        during = gauges.window(start, time.time())
        done = time.time()
        wait_for_a_sample(done)
        after = gauges.window(done, time.time())
    assert all(r.ok for r in recs)
    # The five replies hold their headers for 1 s, together: samples taken then see all five.
    assert during["samples"] >= 1
    assert during["calibration:num_requests_running"]["max"] == 5
    assert after["calibration:num_requests_running"]["max"] == 0


def test_a_long_gap_in_the_schedule_is_waited_in_short_steps(server, monkeypatch):
    """A 3 s silence then a send: one long wait would end up to 3 ms late (the kernel's timer
    slack is 0.1% of the wait), so the driver waits in steps of at most MAX_SLEEP_S and is never
    early. (How late a send is on this host is the self-test's figure, not a test's.)"""
    import asyncio

    from stackbook.loadgen import drivers
    waits, real_sleep = [], asyncio.sleep

    async def recorded_sleep(delay, *args, **kwargs):
        waits.append(delay)
        return await real_sleep(delay, *args, **kwargs)

    monkeypatch.setattr(drivers.asyncio, "sleep", recorded_sleep)
    t = Target(server.base_url, "calibration", {"temperature": 0.0}, {"max_tokens": 2})
    recs = run_open_loop(t, prompts(2), TOK, schedule=[0.0, 3.0], warmup=0, writer=None, base=base("gap"))
    assert all(r.sent_s >= r.scheduled_s for r in recs)
    # Many short steps (a busy host makes each step end late, so there may be fewer than 60).
    assert sum(w > 0 for w in waits) >= 20 and max(waits) <= drivers.MAX_SLEEP_S


def test_a_json_reply_cut_at_max_tokens_is_truncation_not_a_schema_failure(server):
    """The calibration server stops every reply at max_tokens (finish_reason "length"): a JSON
    request, which should end by itself, is length-truncated; a forced-length one is fine."""
    t = Target(server.base_url, "calibration", {"temperature": 0}, {"max_tokens": 8})
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    json_prompt = PromptSpec(0, [{"role": "user", "content": "x"}], 1, schema=schema)
    rec = run_closed_loop(t, [json_prompt], TOK, concurrency=1, warmup=0, writer=None, base=base())[0]
    assert (rec.error_class, rec.finish_reason) == ("length_truncated", "length")
    assert rec.error == "the reply hit max_tokens (8) before ending by itself"
    forced = run_closed_loop(t, prompts(1), TOK, concurrency=1, warmup=0, writer=None, base=base())[0]
    assert (forced.error_class, forced.finish_reason) == ("none", "length")
