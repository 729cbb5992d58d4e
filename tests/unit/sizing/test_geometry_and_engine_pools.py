"""Model geometry (catalog, config.json, GGUF) and the engines' own accounting of a pool,
pinned to the figures in the research notes."""
import json
import subprocess
import sys

import pytest
from stackbook import sizing
from stackbook.model.geometry import geometry_for, geometry_from_config
from stackbook.sizing.memory import GiB

POOL = 23.3 * GiB


@pytest.fixture(scope="module")
def qwen():
    return geometry_for("qwen3.8-27b")


def test_catalog_layer_kinds():
    q = geometry_for("qwen3.8-27b")
    assert (q.kv_layers, q.linear_layers, q.state_dtype) == (16, 48, "fp32")
    n = geometry_for("qwen3-next-80b-a3b")
    assert (n.kv_layers, n.linear_layers, n.num_experts, n.experts_per_token) == (12, 36, 512, 10)
    o = geometry_for("gpt-oss-120b")
    assert (o.kv_layers, o.sliding_layers, o.sliding_window) == (18, 18, 128)
    d = geometry_for("deepseek-v3")
    assert d.is_mla and d.kv_lora_rank == 512


def test_qwen3_next_kv_and_state():
    n = geometry_for("qwen3-next-80b-a3b")
    assert sizing.model_kv_bytes_per_token(n) == 24_576            # 2 x 12 x 2 x 256 x 2
    assert round(sizing.model_state_bytes_per_sequence(n) / 1e6, 1) == 77.3


def test_mla_latent_is_per_layer_not_per_head():
    d = geometry_for("deepseek-v3")
    assert sizing.model_kv_bytes_per_token(d) == 61 * (512 + 64) * 2
    assert sizing.model_kv_bytes_per_token(d, tensor_parallel=8) == 61 * (512 + 64) * 2  # replicated latent


def test_sliding_window_layers_stop_growing():
    o = geometry_for("gpt-oss-120b")
    full = sizing.model_kv_bytes_per_token(o)
    assert full == 18 * 2 * 8 * 64 * 2
    at_8k = sizing.model_kv_bytes_per_sequence(o, 8192)
    assert at_8k == 8192 * full + 128 * full                      # same shape, window of 128
    assert sizing.model_kv_bytes_per_sequence(o, 100) == 100 * full * 2


def test_vllm_accounting_of_the_seed_pool(qwen):
    acc = sizing.vllm_kv_accounting(qwen, POOL, 8192)
    assert acc["attention_block_tokens"] == 784                   # "Setting attention block size to 784 tokens"
    assert acc["page_bytes"] == 3_211_264 and acc["state_page_padding_pct"] == 0.13
    assert acc["num_blocks"] == 486 and acc["blocks_per_request"] == 14
    assert acc["max_concurrency"] == 34.71                        # the seed's "vLLM 34.7x"
    assert acc["kv_cache_size_tokens"] == 94_864


def test_vllm_accounting_of_fp8_kv_doubles_the_block(qwen):
    assert sizing.vllm_kv_accounting(qwen, POOL, 8192, kv_precision="fp8")["attention_block_tokens"] == 1568


def test_vllm_cpu_accounting_matches_the_engine_here():
    e = geometry_for("smollm2-135m")
    acc = sizing.vllm_kv_accounting(e, 1 * GiB, 2048, block_size=128)
    assert (acc["num_blocks"], acc["kv_cache_size_tokens"], acc["max_concurrency"]) == (364, 46_592, 22.75)


@pytest.mark.parametrize("ratio, radix, slots, running", [
    (0.9, "extra_buffer", 76, 15),
    (0.9, "no_buffer", 76, 25),
])
def test_sglang_accounting(qwen, ratio, radix, slots, running):
    acc = sizing.sglang_kv_accounting(qwen, POOL, 8192, mamba_full_memory_ratio=ratio, radix_cache=radix)
    assert acc["max_mamba_cache_size"] == slots and acc["max_running_requests"] == running


def test_sglang_balanced_ratio_reaches_36_without_radix(qwen):
    r = sizing.balanced_mamba_ratio(qwen, 8192, radix_cache="disabled")
    assert round(r, 3) == 0.287
    assert sizing.sglang_kv_accounting(qwen, POOL, 8192, mamba_full_memory_ratio=r,
                                       radix_cache="disabled")["max_concurrency"] == 36
    r5 = sizing.balanced_mamba_ratio(qwen, 8192)
    assert round(r5, 3) == 1.434
    assert sizing.sglang_kv_accounting(qwen, POOL, 8192, mamba_full_memory_ratio=r5)["max_running_requests"] == 19


def test_roofline_matches_the_notes(qwen):
    # Q4_K_M: 17.95 GB read per token at 8K -> H100 187, A100 114, RTX 4090 56 tok/s
    q4 = sizing.weight_bytes(qwen.num_parameters, "q4_k_m", 17_106_773_984)
    kv, st = sizing.model_kv_bytes_per_token(qwen), sizing.model_state_bytes_per_sequence(qwen)
    for hw, expected in (("h100-sxm", 187), ("a100-80gb", 114), ("rtx-4090", 56)):
        bw = sizing.accelerator(hw).bandwidth
        assert round(sizing.roofline_decode_tok_s(bw, q4, 8192, kv, st)) == expected


def test_config_missing_field_is_named():
    with pytest.raises(KeyError, match="'vocab_size'"):
        geometry_from_config({"num_attention_heads": 8, "hidden_size": 512, "num_hidden_layers": 4}, where="x.json")


def test_unknown_model_lists_close_matches():
    with pytest.raises(KeyError, match="qwen3.8-27b"):
        geometry_for("qwen3.8-72b")


def test_embedded_gguf_and_hf_config_agree(real_engines):
    a, b = geometry_for(real_engines.gguf), geometry_for(real_engines.hf_dir)
    for field in ("num_layers", "num_kv_heads", "head_dim", "hidden_size", "num_parameters"):
        assert getattr(a, field) == getattr(b, field), field
    assert a.num_parameters == 134_515_008
    assert sizing.model_kv_bytes_per_token(a) == 23_040


def run_size(*args):
    r = subprocess.run([sys.executable, "-m", "stackbook.cli", "size", *args], capture_output=True, text=True)
    return r


def test_cli_size_reproduces_the_seed():
    r = run_size("--model", "qwen3.8-27b", "--hardware", "a100-80gb", "--context", "8192", "--kv-dtype", "bf16",
                 "--state-dtype", "fp32", "--pool-gib", "23.3", "--engine", "vllm", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["weights_bytes"] == 53_792_000_000 and d["kv_bytes_per_token"] == 65_536
    assert d["state_bytes_per_sequence"] == 153_944_064 and d["max_live_sequences"] == 36
    assert d["cache_pool_bytes"] == int(23.3 * GiB) and d["max_concurrency"] == 34.71
    r = run_size("--model", "qwen3.8-27b", "--hardware", "a100-80gb", "--pool-gib", "23.3", "--engine", "sglang",
                 "--json")
    assert json.loads(r.stdout)["max_concurrency"] == 15


@pytest.mark.parametrize("args, message", [
    (["--model", "qwen3.8-27b", "--hardware", "a100"], "close matches"),
    (["--model", "qwen3.8-27b", "--context", "300000", "--hardware", "h200"],
     "exceeds qwen3.8-27b's maximum of 262,144"),
    (["--model", "qwen3.8-27b", "--hardware", "rtx-4090", "--pool-gib", "40"], "larger than the device"),
])
def test_cli_size_refuses_impossible_requests(args, message):
    r = run_size(*args)
    assert r.returncode == 2 and message in r.stderr, r.stderr


def test_q4_k_m_artifact_is_5_09_bits_per_weight(qwen):
    from stackbook.model.geometry import model_catalog
    rows = {r["precision"]: r for r in sizing.weights_by_precision(
        qwen.num_parameters, model_catalog()["qwen3.8-27b"]["artifacts"])}
    assert rows["q4_k_m"]["bits per weight"] == 5.09
    assert (rows["q4_k_m"]["GB"], rows["q4_k_m"]["GiB"]) == (17.11, 15.93)
    assert rows["bf16"]["GB"] == 53.79


@pytest.mark.parametrize("kind, concurrency", [("vllm", 34.71), ("sglang", 15), ("trtllm", 36), ("llama_cpp", 4),
                                               ("mlx", 4)])
def test_cli_size_applies_each_engine_kinds_own_rule(kind, concurrency):
    r = run_size("--model", "qwen3.8-27b", "--hardware", "a100-80gb", "--state-dtype", "fp32", "--pool-gib", "23.3",
                 "--engine", kind, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["engine"]["name"] == kind and d["max_concurrency"] == concurrency and d["engine"]["rule"]


def test_cli_size_engine_fields_reach_the_rule_and_bad_ones_are_named():
    small = run_size("--model", "qwen3.8-27b", "--hardware", "a100-80gb", "--engine", "llama_cpp",
                     "--engine-field", "parallel=2", "--json")
    assert json.loads(small.stdout)["max_concurrency"] == 2
    bad = run_size("--model", "qwen3.8-27b", "--hardware", "a100-80gb", "--engine", "vllm",
                   "--engine-field", "gpu_memory_utilization=1.5")
    assert bad.returncode == 2 and "gpu_memory_utilization" in bad.stderr and "less than or equal to 1" in bad.stderr
    unknown = run_size("--model", "qwen3.8-27b", "--hardware", "a100-80gb", "--engine", "vlm")
    assert unknown.returncode == 2 and "registered kinds" in unknown.stderr and "trtllm" in unknown.stderr
