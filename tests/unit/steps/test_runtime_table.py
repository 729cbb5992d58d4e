"""The sweep notebook's runtime table and telemetry table."""
import pytest

from stackbook.steps.sweep import runtime_table, telemetry_table


def test_runtime_table_per_request_cpu_and_engine_phases():
    sweep = {"points": {
        "c1-r0": {"cpu_seconds": {"client": 0.5, "engine": {"api_server": 1.0, "engine_core": 20.0}},
                  "requests_in_cpu_window": 10, "cpu_window_s": 25.0, "batch_size_mean": 1.0,
                  "engine_time_ms": {"queue": 2.0, "prefill": 30.0, "decode": 1900.0, "inference": 1930.0,
                                     "source": "engine histograms"},
                  "work_tokens": {"prompt_tokens": 1280, "generated_tokens": 640, "source": "engine counters"},
                  "spec_decode": "not used: the engine exported no speculative-decoding counters"},
        "c2-r0": {"requests": 12}}}   # recorded before the readings existed: no row
    t = runtime_table(sweep)
    assert list(t.index) == ["c1-r0"]
    assert t.loc["c1-r0", "engine_core CPU per request (ms)"] == pytest.approx(2000.0)
    assert t.loc["c1-r0", "client CPU per request (ms)"] == pytest.approx(50.0)
    assert t.loc["c1-r0", "engine decode (ms)"] == 1900.0
    assert t.loc["c1-r0", "accepted length"].startswith("not used")


def test_telemetry_table_leaves_buckets_out():
    t = telemetry_table({"telemetry": {"c1-r0": {"vllm:request_queue_time_seconds_bucket{le=0.3}": 2.0,
                                                 "vllm:request_queue_time_seconds_sum": 1.0}}})
    assert list(t.index) == ["vllm:request_queue_time_seconds_sum"]
