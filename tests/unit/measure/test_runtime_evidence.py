"""Runtime evidence per sweep point: process roles, CPU windows, the engine's own timings
(vLLM's histograms, llama-server's final-chunk timings), batch size, work and speculation."""
import subprocess
import sys

import pytest

from stackbook.engines import adapter_class
from stackbook.loadgen.http_client import StreamedReply, final_chunk_timings
from stackbook.measure.runtime import (
    batch_size_mean,
    engine_time_from_histograms,
    engine_time_from_timings,
    histogram_cv,
    process_role,
    process_window,
    read_processes,
    runtime_evidence,
    spec_decode,
    work_tokens,
)
from stackbook.measure.telemetry import metrics_delta, parse_exposition

from tests.support.records import request_record

# Each point is read by the names its own arm's kind gives its series.
VLLM = adapter_class("vllm_cpu").metric_series
LLAMA = adapter_class("llama_cpp").metric_series


@pytest.mark.parametrize("name, cmdline, role", [
    ("VLLM::EngineCor", "VLLM::EngineCore", "engine_core"),   # the kernel's 15-character comm
    ("VLLM::EngineCore", "", "engine_core"),
    ("python", "/x/bin/python -m vllm.entrypoints.openai.api_server --model m", "api_server"),
    ("vllm", "/x/bin/vllm serve m", "api_server"),
    ("llama-server", "/c/llama-server -m m.gguf --threads 1", "llama_server"),
    ("python3", "python3 -m mlx_lm server --model m", "mlx_lm_server"),
    ("python", "python -c from multiprocessing.resource_tracker import main", "resource_tracker"),
    ("my worker/2", "", "my_worker_2"),   # unknown: kept by its own name
])
def test_process_roles_are_stable_names(name, cmdline, role):
    assert process_role(name, cmdline) == role


def reading(client, **engine):
    return {"client": {"cpu_s": client},
            "engine": {pid: dict(role=role, cpu_s=cpu, minor_faults=mi, major_faults=ma, voluntary_ctx_switches=v,
                                 involuntary_ctx_switches=i, threads=t)
                       for pid, (role, cpu, mi, ma, v, i, t) in engine.items()}}


def test_process_window_subtracts_readings_and_sums_roles():
    before = reading(10.0, a=("api_server", 5.0, 100, 1, 50, 5, 10), b=("engine_core", 30.0, 2000, 3, 400, 40, 2))
    after = reading(11.25, a=("api_server", 8.5, 160, 1, 90, 9, 10), b=("engine_core", 70.1, 2600, 5, 1400, 90, 2),
                    c=("resource_tracker", 0.25, 10, 0, 3, 0, 1))   # born during the point: counted from zero
    w = process_window(before, after)
    assert w["cpu_seconds"] == {"client": 1.25, "engine": {"api_server": 3.5, "engine_core": 40.1,
                                                           "resource_tracker": 0.25}}
    assert w["engine_host_counters"] == {"minor_faults": 60 + 600 + 10, "major_faults": 2,
                                         "voluntary_ctx_switches": 40 + 1000 + 3, "involuntary_ctx_switches": 54}
    assert w["engine_threads"] == {"api_server": 10, "engine_core": 2, "resource_tracker": 1}


def test_read_processes_finds_a_process_group_and_its_cpu():
    child = subprocess.Popen([sys.executable, "-c", "import time\nt=time.process_time()\n"
                              "while time.process_time() - t < 0.2: pass\ntime.sleep(5)"], start_new_session=True)
    try:
        import time
        time.sleep(0.6)
        r = read_processes(child.pid)
        (proc,) = r["engine"].values()
        assert proc["cpu_s"] >= 0.15
        assert proc["minor_faults"] > 0 and proc["threads"] >= 1
        assert r["client"]["cpu_s"] > 0
    finally:
        child.kill()
        child.wait()


# A vLLM /metrics excerpt (v0.x layout) at a point's start and end.
VLLM_BEFORE = """\
# HELP vllm:request_queue_time_seconds Histogram of time spent in WAITING phase for request.
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_sum{engine="0",model_name="smollm2-135m-instruct"} 1.0
vllm:request_queue_time_seconds_bucket{engine="0",le="0.3",model_name="smollm2-135m-instruct"} 1.0
vllm:request_queue_time_seconds_bucket{engine="0",le="1.0",model_name="smollm2-135m-instruct"} 2.0
vllm:request_queue_time_seconds_bucket{engine="0",le="+Inf",model_name="smollm2-135m-instruct"} 2.0
vllm:request_queue_time_seconds_count{engine="0",model_name="smollm2-135m-instruct"} 2.0
# HELP vllm:request_prefill_time_seconds Histogram of time spent in PREFILL phase for request.
# TYPE vllm:request_prefill_time_seconds histogram
vllm:request_prefill_time_seconds_sum{engine="0",model_name="smollm2-135m-instruct"} 0.2
vllm:request_prefill_time_seconds_count{engine="0",model_name="smollm2-135m-instruct"} 2.0
# HELP vllm:request_decode_time_seconds Histogram of time spent in DECODE phase for request.
# TYPE vllm:request_decode_time_seconds histogram
vllm:request_decode_time_seconds_sum{engine="0",model_name="smollm2-135m-instruct"} 4.0
vllm:request_decode_time_seconds_count{engine="0",model_name="smollm2-135m-instruct"} 2.0
# HELP vllm:iteration_tokens_total Histogram of number of tokens per engine_step.
# TYPE vllm:iteration_tokens_total histogram
vllm:iteration_tokens_total_sum{engine="0",model_name="smollm2-135m-instruct"} 100.0
vllm:iteration_tokens_total_count{engine="0",model_name="smollm2-135m-instruct"} 50.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="smollm2-135m-instruct"} 128.0
"""
VLLM_AFTER = """\
# HELP vllm:request_queue_time_seconds Histogram of time spent in WAITING phase for request.
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_sum{engine="0",model_name="smollm2-135m-instruct"} 3.4
vllm:request_queue_time_seconds_bucket{engine="0",le="0.3",model_name="smollm2-135m-instruct"} 3.0
vllm:request_queue_time_seconds_bucket{engine="0",le="1.0",model_name="smollm2-135m-instruct"} 6.0
vllm:request_queue_time_seconds_bucket{engine="0",le="+Inf",model_name="smollm2-135m-instruct"} 6.0
vllm:request_queue_time_seconds_count{engine="0",model_name="smollm2-135m-instruct"} 6.0
# HELP vllm:request_prefill_time_seconds Histogram of time spent in PREFILL phase for request.
# TYPE vllm:request_prefill_time_seconds histogram
vllm:request_prefill_time_seconds_sum{engine="0",model_name="smollm2-135m-instruct"} 0.6
vllm:request_prefill_time_seconds_count{engine="0",model_name="smollm2-135m-instruct"} 6.0
# HELP vllm:request_decode_time_seconds Histogram of time spent in DECODE phase for request.
# TYPE vllm:request_decode_time_seconds histogram
vllm:request_decode_time_seconds_sum{engine="0",model_name="smollm2-135m-instruct"} 16.0
vllm:request_decode_time_seconds_count{engine="0",model_name="smollm2-135m-instruct"} 6.0
# HELP vllm:iteration_tokens_total Histogram of number of tokens per engine_step.
# TYPE vllm:iteration_tokens_total histogram
vllm:iteration_tokens_total_sum{engine="0",model_name="smollm2-135m-instruct"} 400.0
vllm:iteration_tokens_total_count{engine="0",model_name="smollm2-135m-instruct"} 150.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="smollm2-135m-instruct"} 384.0
"""


def test_vllm_histogram_means_over_a_point():
    delta = metrics_delta(parse_exposition(VLLM_BEFORE), parse_exposition(VLLM_AFTER))
    t = engine_time_from_histograms(delta, VLLM)
    # 4 requests in the point: queue (3.4 - 1.0) / 4 s, prefill 0.4 / 4 s, decode 12 / 4 s.
    assert t["queue"] == pytest.approx(600.0)
    assert t["prefill"] == pytest.approx(100.0)
    assert t["decode"] == pytest.approx(3000.0)
    assert t["inference"] is None and t["requests"] == 4
    # Buckets are kept as increases: 2 observations <= 0.3 s, 2 in (0.3, 1.0].
    assert delta["vllm:request_queue_time_seconds_bucket{le=0.3}"] == 2.0
    assert delta["vllm:request_queue_time_seconds_bucket{le=1.0}"] == 4.0
    # Midpoints 0.15 (x2) and 0.65 (x2): mean 0.4, sd 0.25, CV 0.625.
    assert histogram_cv(delta, "request_queue_time_seconds") == pytest.approx(0.625)
    assert work_tokens(delta, [], VLLM)["generated_tokens"] == 256
    # llama-server's names read nothing of vLLM's series: its counters are its own.
    assert engine_time_from_histograms(delta, LLAMA) is None
    assert work_tokens(delta, [], LLAMA)["source"] == "replies' usage counts"


def test_no_histograms_reads_none():
    assert engine_time_from_histograms({"llamacpp:prompt_tokens_total": 10.0}, LLAMA) is None


def test_spec_decode_accepted_length_or_not_used():
    assert spec_decode({}, VLLM).startswith("not used: the engine exported no")
    # llama-server exports the counters even without a draft model: zero drafts is "not used" too.
    assert spec_decode({"llamacpp:spec_decode_num_drafts_total": 0, "llamacpp:spec_decode_num_draft_tokens_total": 0,
                        "llamacpp:spec_decode_num_accepted_tokens_total": 0}, LLAMA).startswith("not used: no drafts")
    s = spec_decode({"vllm:spec_decode_num_drafts_total": 100.0, "vllm:spec_decode_num_accepted_tokens_total": 150.0,
                     "vllm:spec_decode_num_draft_tokens_total": 300.0}, VLLM)
    assert s["accepted_length_mean"] == 2.5 and s["acceptance_rate"] == 0.5


def test_batch_size_from_the_arms_own_gauge():
    assert batch_size_mean({"samples": 3, "vllm:num_requests_running": {"mean": 3.2414, "max": 4.0}}, VLLM) == 3.2414
    assert batch_size_mean({"samples": 3, "llamacpp:requests_processing": {"mean": 3.725, "max": 4}}, LLAMA) == 3.725
    assert batch_size_mean({"samples": 3, "llamacpp:requests_processing": {"mean": 3.725, "max": 4}}, VLLM) is None
    assert batch_size_mean({"samples": 0}, VLLM) is None


# llama-server's last chunk before [DONE] (usage and timings), verbatim from the cached build
# (b1-0c1e570) serving the embedded bf16 GGUF, --threads 1; the model path shortened.
LLAMA_FINAL_CHUNK = (
    b'{"choices":[],"created":1796071202,"id":"chatcmpl-HbCKmodp59BWJ3bkUk0xtAyHKwMERyX8",'
    b'"model":"smollm2-135m-instruct-bf16.gguf","system_fingerprint":"b1-0c1e570",'
    b'"object":"chat.completion.chunk","usage":{"completion_tokens":8,"prompt_tokens":36,"total_tokens":44,'
    b'"prompt_tokens_details":{"cached_tokens":0}},"timings":{"cache_n":0,"prompt_n":36,"prompt_ms":186.129,'
    b'"prompt_per_token_ms":5.170249999999999,"prompt_per_second":193.41424495914123,"predicted_n":8,'
    b'"predicted_ms":289.624,"predicted_per_token_ms":41.374857142857145,"predicted_per_second":24.169267740242518}}')
FINISH_CHUNK = (b'{"choices":[{"finish_reason":"length","index":0,"delta":{}}],"created":1796071202,'
                b'"id":"chatcmpl-HbCKmodp59BWJ3bkUk0xtAyHKwMERyX8","model":"smollm2-135m-instruct-bf16.gguf",'
                b'"system_fingerprint":"b1-0c1e570","object":"chat.completion.chunk"}')


def test_llama_server_timings_from_the_final_chunk():
    events = [(0.1, b'{"choices":[{"delta":{"content":"Hi"}}]}'), (0.2, FINISH_CHUNK), (0.2, LLAMA_FINAL_CHUNK),
              (0.2, b"[DONE]")]
    t = final_chunk_timings(events)
    assert t["prompt_n"] == 36 and t["prompt_ms"] == 186.129 and t["predicted_n"] == 8 and t["predicted_ms"] == 289.624
    assert t["cache_n"] == 0
    assert StreamedReply(segments=[(at, b"data: " + d + b"\n\n") for at, d in events]).engine_timings == t
    assert final_chunk_timings([(0.1, b'{"choices":[]}'), (0.2, b"[DONE]")]) is None
    # The second request of that run: its prompt came from the cache but one token (cache_n 35).
    agg = engine_time_from_timings([t, {**t, "cache_n": 35, "prompt_n": 1, "prompt_ms": 40.168,
                                        "predicted_ms": 280.555}], LLAMA)
    assert agg["prefill"] == pytest.approx((186.129 + 40.168) / 2, abs=1e-3)
    assert agg["decode"] == pytest.approx((289.624 + 280.555) / 2, abs=1e-3)
    assert agg["inference"] == pytest.approx(agg["prefill"] + agg["decode"], abs=2e-3) and agg["queue"] is None


def rec(i, ok=True, timings=None):
    return request_record(point="c2-r0", concurrency=2, request_index=i, prompt_tokens_client=30,
                          prompt_tokens_server=31, output_tokens_server=8, output_tokens_requested=8,
                          error_class="none" if ok else "timeout", engine_timings=timings)


def test_runtime_evidence_of_a_llama_point():
    t = final_chunk_timings([(0.2, LLAMA_FINAL_CHUNK)])
    before = reading(1.0, p=("llama_server", 10.0, 5, 0, 1, 1, 4))
    after = reading(1.5, p=("llama_server", 13.0, 9, 0, 11, 2, 4))
    ev = runtime_evidence(before, after, 2.0, {"llamacpp:prompt_tokens_total": 62.0,
                                               "llamacpp:tokens_predicted_total": 16.0},
                          [rec(0, timings=t), rec(1, timings=t), rec(2, ok=False)],
                          {"samples": 2, "llamacpp:requests_processing": {"mean": 1.5, "max": 2}}, LLAMA)
    assert ev["cpu_seconds"] == {"client": 0.5, "engine": {"llama_server": 3.0}}
    assert ev["requests_in_cpu_window"] == 2
    assert ev["engine_time_ms"]["prefill"] == 186.129 and ev["engine_time_ms"]["decode"] == 289.624
    assert ev["batch_size_mean"] == 1.5
    assert ev["work_tokens"] == {"prompt_tokens": 62, "generated_tokens": 16, "cached_prompt_tokens": 0,
                                 "source": "engine counters"}
    assert ev["spec_decode"].startswith("not used")
