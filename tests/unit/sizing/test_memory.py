"""The memory arithmetic, pinned to the seed's figures and the embedded model's geometry."""
import pytest
from stackbook import sizing
from stackbook.sizing.memory import GB, GiB

# Qwen3.8-27B text decoder: 64 layers = 16 full attention + 48 Gated DeltaNet.
QWEN = dict(kv_layers=16, num_kv_heads=4, head_dim=256)
QWEN_GDN = dict(linear_layers=48, linear_num_key_heads=16, linear_num_value_heads=48,
                linear_key_head_dim=128, linear_value_head_dim=128, conv_kernel=4)
POOL = 23.3 * GiB
CTX = 8192


def test_qwen_kv_per_token_is_64_kib():
    assert sizing.kv_bytes_per_token(**QWEN, kv_precision="bf16") == 64 * 1024


def test_qwen_fp32_state_is_153_9_mb():
    state = sizing.recurrent_state_bytes_per_sequence(**QWEN_GDN, state_precision="fp32")
    assert state == 153_944_064
    assert round(state / 1e6, 1) == 153.9


@pytest.mark.parametrize("kv, state, expected", [
    ("bf16", "fp32", 36),   # the seed's figure
    ("bf16", None, 46),     # no recurrent state counted
    ("bf16", "bf16", 40),   # state in bf16
    ("fp8", "fp32", 59),    # fp8 KV, fp32 state
])
def test_live_sequences_under_each_assumption(kv, state, expected):
    per_tok = sizing.kv_bytes_per_token(**QWEN, kv_precision=kv)
    st = sizing.recurrent_state_bytes_per_sequence(**QWEN_GDN, state_precision=state) if state else 0
    assert sizing.max_live_sequences(POOL, CTX, per_tok, st) == expected


def test_qwen_bf16_weights_54_gb_and_q4_k_m_artifact():
    assert round(sizing.weight_bytes(26_900_000_000, "bf16") / GB) == 54
    art = sizing.weight_bytes(26_900_000_000, "q4_k_m", artifact_bytes=17_106_773_984)
    assert round(art / GB, 1) == 17.1 and round(art / GiB, 2) == 15.93


def test_embedded_model_kv_per_token():
    # 30 layers x 2 x 3 KV heads x 64 x 2 B, as vLLM's own accounting agrees.
    assert sizing.kv_bytes_per_token(30, 3, 64, "bf16") == 23_040


def test_tensor_parallel_splits_kv_heads():
    assert sizing.kv_bytes_per_token(16, 4, 256, "bf16", tensor_parallel=2) == 32 * 1024
    # fewer KV heads than ranks: heads are replicated, not split below one
    assert sizing.kv_bytes_per_token(16, 4, 256, "bf16", tensor_parallel=8) == 16 * 1024


def test_cache_pool_refuses_when_nothing_is_left():
    with pytest.raises(ValueError, match="nothing is left for the cache"):
        sizing.cache_pool_bytes(24 * GB, weights=54 * GB)


def test_unknown_precision_names_the_close_matches():
    with pytest.raises(ValueError, match="q4_k_m"):
        sizing.weight_bytes(1000, "q4_km")


def test_roofline_bound():
    # 1 TB/s over 10 GB of weights: 100 tokens/s at most.
    assert sizing.roofline_decode_tok_s(1e12, 10e9) == pytest.approx(100.0)


def test_catalog_has_sources_and_unknown_names_suggest():
    cat = sizing.accelerator_catalog()
    for key in ("rtx-4090", "rtx-5090", "l40s", "a100-80gb", "h100-sxm", "h200", "b200", "mi300x", "m4-max",
                "mac-32gb", "cerebras-wse-3"):
        assert cat[key].source and cat[key].bandwidth > 0 and cat[key].memory_bytes > 1e9
    with pytest.raises(KeyError, match="h100-sxm"):
        sizing.accelerator("h100")
