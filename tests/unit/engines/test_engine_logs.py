"""Realized-capacity parsing on engine log text: the CPU line as vLLM-CPU printed it here, the
GPU lines as quoted verbatim in the research notes (issues and PRs of each engine)."""
from stackbook.engines.sglang import parse_sglang_capacity
from stackbook.engines.vllm import parse_vllm_capacity

VLLM_CPU_LOG = ("(EngineCore pid=5005) INFO 11-30 05:14:13 [kv_cache_utils.py:2327] CPU KV cache size: 46,592 tokens, "
                "Maximum concurrency for 2,048 tokens per request: 22.75x\n")
# Two-line format of vLLM 0.8 to 0.27, and the 'GPU + host' pool label of newer releases.
VLLM_GPU_LOG = ("INFO 02-19 23:56:55 kv_cache_utils.py:524] GPU KV cache size: 2,042,016 tokens\n"
                "INFO 02-19 23:56:55 kv_cache_utils.py:527] Maximum concurrency for 2,048 tokens per request: 997.08x\n")
VLLM_HOST_POOL = ("(EngineCore pid=4242) INFO 11-30 04:45:00 [kv_cache_utils.py:1146] GPU + host KV cache size: "
                  "4,455,808 tokens, Maximum concurrency for 8,192 tokens per request: 543.92x\n")
# SGLang's scheduler line in the v0.5.23 format (format string in python/sglang/srt/managers/scheduler.py).
SGLANG_LOG = ("[2026-05-01 10:00:00 TP0] max_total_num_tokens=412345, chunked_prefill_size=8192, "
              "max_prefill_tokens=16384, max_running_requests=48, context_len=8192, available_gpu_mem=10.12 GB\n")


def test_vllm_cpu_capacity():
    c = parse_vllm_capacity(VLLM_CPU_LOG)
    assert c["kv_pool"] == "CPU" and c["kv_tokens"] == 46_592
    assert c["max_concurrency_context"] == 2048 and c["max_concurrency"] == 22.75


def test_vllm_gpu_capacity_with_ansi_colour():
    c = parse_vllm_capacity("\x1b[32m" + VLLM_GPU_LOG + "\x1b[0m")
    assert c["kv_tokens"] == 2_042_016 and c["max_concurrency"] == 997.08 and c["kv_pool"] == "GPU"


def test_vllm_host_pool_label():
    c = parse_vllm_capacity(VLLM_HOST_POOL)
    assert c["kv_pool"] == "GPU + host" and c["kv_tokens"] == 4_455_808 and c["max_concurrency_context"] == 8192


def test_sglang_capacity():
    c = parse_sglang_capacity(SGLANG_LOG)
    assert c == {"source": "SGLang log", "kv_tokens": 412_345, "max_running_requests": 48, "context_len": 8192}


def test_missing_lines_give_only_the_source():
    assert parse_vllm_capacity("nothing here") == {"source": "vLLM log"}
