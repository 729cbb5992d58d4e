"""Each kind's capacity as configured and as its own allocation rule predicts it, against values
worked out by hand for SmolLM2-135M's geometry: 30 layers, 3 KV heads of 64 dimensions, so one
token of bf16 KV is 2 (K and V) x 30 x 3 x 64 x 2 bytes = 23,040 bytes, 768 bytes per layer."""
import pytest
from stackbook.config.protocol import Protocol
from stackbook.engines.llama_cpp import LlamaCppEngine
from stackbook.engines.openai_endpoint import OpenAIEndpoint
from stackbook.engines.sglang import SglangEngine
from stackbook.engines.spec import CapacityBasis
from stackbook.engines.trtllm import TrtllmEngine
from stackbook.engines.vllm import VllmEngine
from stackbook.engines.vllm_cpu import VllmCpuEngine
from stackbook.model.geometry import ModelGeometry

GiB = 2**30
SMOLLM2 = ModelGeometry(name="smollm2-135m", architecture="LlamaForCausalLM", num_layers=30, hidden_size=576,
                        num_attention_heads=9, num_kv_heads=3, head_dim=64, vocab_size=49152, max_context=8192,
                        num_parameters=134_515_008)


def basis(protocol=None, pool_bytes=None, device=16 * GiB, activations=GiB // 2, artifact=None) -> CapacityBasis:
    return CapacityBasis(geometry=SMOLLM2, protocol=protocol or Protocol(), device_memory_bytes=device,
                         activations_bytes=activations, artifact_bytes=artifact, pool_bytes=pool_bytes)


def test_configured_capacity_per_kind():
    p = Protocol(context_length=2048)
    assert LlamaCppEngine(kind="llama_cpp", parallel=4).configured_capacity(p) == {
        "slots": 4, "context_per_sequence": 2048, "total_context_cells": 8192}
    assert VllmCpuEngine(kind="vllm_cpu", kv_cache_gib=2).configured_capacity(p) == {
        "kv_cache_space_gib": 2, "max_model_len": 2048, "max_num_seqs": "engine default"}
    assert VllmEngine(kind="vllm", gpu_memory_utilization=0.9).configured_capacity(p) == {
        "gpu_memory_utilization": 0.9, "max_model_len": 2048}
    assert SglangEngine(kind="sglang").configured_capacity(p) == {
        "mem_fraction_static": "engine default", "context_length": 2048}
    assert OpenAIEndpoint(kind="openai_endpoint", base_url="https://x/v1").configured_capacity(p) == {
        "note": "a managed endpoint does not disclose its capacity"}


def test_llama_cpp_gives_each_slot_the_protocol_context():
    got = LlamaCppEngine(kind="llama_cpp", parallel=4).predicted_capacity(basis())
    # 4 slots x 2,048 cells = 8,192 cells; x 23,040 bytes = 188,743,680 bytes = 180 MiB
    assert got["kv_tokens"] == 8192 and got["kv_cache_mib"] == 180.0 and got["max_concurrency"] == 4


def test_vllm_cpu_rule_reproduces_the_engine_log():
    spec = VllmCpuEngine(kind="vllm_cpu", kv_cache_gib=1)
    assert spec.cache_pool_bytes() == GiB
    got = spec.predicted_capacity(basis())
    # 128-token blocks of 768 bytes per layer: 98,304 bytes; 2**30 // 98,304 = 10,922 pages over
    # 30 layers = 364 blocks = 46,592 tokens; a 2,048-token request takes 16 blocks: 364 / 16 = 22.75.
    # vLLM-CPU logged exactly this here: "CPU KV cache size: 46,592 tokens ... 2,048 tokens per request: 22.75x".
    assert (got["num_blocks"], got["kv_tokens"], got["max_concurrency"]) == (364, 46_592, 22.75)


def test_vllm_gpu_rule_from_device_memory_or_a_known_pool():
    spec = VllmEngine(kind="vllm", gpu_memory_utilization=0.5)
    got = spec.predicted_capacity(basis())
    # 8 GiB allowed - 269,030,016 bytes of bf16 weights (2 x 134,515,008) - 0.5 GiB activations
    # = 7,784,033,664 bytes; / 12,288 (16-token block) = 633,466 pages; / 30 layers = 21,115 blocks
    # = 337,840 tokens; a 2,048-token request takes 128 blocks: 21,115 / 128 = 164.96.
    assert got["available_kv_bytes"] == 7_784_033_664
    assert (got["num_blocks"], got["kv_tokens"], got["max_concurrency"]) == (21_115, 337_840, 164.96)
    # A measured pool (hardware.pool_gib, or the engine's own report) replaces the estimate.
    pooled = spec.predicted_capacity(basis(pool_bytes=GiB))
    # 2**30 // 12,288 = 87,381 pages; / 30 = 2,912 blocks = 46,592 tokens; 2,912 / 128 = 22.75
    assert (pooled["num_blocks"], pooled["kv_tokens"], pooled["max_concurrency"]) == (2912, 46_592, 22.75)
    assert spec.cache_pool_bytes() is None


def test_sglang_rule_splits_a_known_pool():
    spec = SglangEngine(kind="sglang")
    got = spec.predicted_capacity(basis(pool_bytes=GiB))
    # No recurrent state: all of 2**30 bytes is KV, // 23,040 = 46,603 tokens; running <= tokens // 2
    # = 23,301; and <= 46,603 // 2,048 = 22 full-context requests.
    assert (got["kv_tokens"], got["max_running_requests"], got["max_concurrency"]) == (46_603, 23_301, 22)
    assert got["radix_cache"] == "extra_buffer" and got["state_slots_per_request"] == 5
    off = SglangEngine(kind="sglang", disable_radix_cache=True).predicted_capacity(basis(pool_bytes=GiB))
    assert off["radix_cache"] == "disabled" and off["state_slots_per_request"] == 1
    with pytest.raises(ValueError, match="set hardware.pool_gib"):
        spec.predicted_capacity(basis())


def test_the_managed_endpoint_predicts_nothing():
    got = OpenAIEndpoint(kind="openai_endpoint", base_url="https://x/v1").predicted_capacity(basis())
    assert got == {"rule": "a managed endpoint discloses no capacity"}


def test_state_precision_falls_back_to_fp32_only_when_unset():
    assert basis(Protocol(precision={"state": "none"})).state_precision == "fp32"
    assert basis(Protocol(precision={"state": "bf16"})).state_precision == "bf16"


def test_trtllm_rule_from_free_memory_or_a_known_pool():
    spec = TrtllmEngine(kind="trtllm", kv_cache_free_gpu_memory_fraction=0.9)
    got = spec.predicted_capacity(basis())
    # 0.9 x (16 GiB - 269,030,016 bytes of weights - 0.5 GiB) = 14,736,571,430.4 bytes; a 32-token
    # block is 737,280 bytes: 19,987 blocks = 639,584 tokens; a 2,048-token request takes 64 blocks
    # (47,185,920 bytes, no recurrent state): 312 of them.
    assert (got["primary_blocks"], got["kv_tokens"], got["max_concurrency"]) == (19_987, 639_584, 312)
    assert got["state_bytes_per_request"] == 0
    pooled = spec.predicted_capacity(basis(pool_bytes=GiB))
    # 2**30 // 737,280 = 1,456 blocks = 46,592 tokens; 2**30 // 47,185,920 = 22 requests
    assert (pooled["primary_blocks"], pooled["kv_tokens"], pooled["max_concurrency"]) == (1456, 46_592, 22)
    # max_batch_size caps the requests
    assert TrtllmEngine(kind="trtllm", max_batch_size=8).predicted_capacity(basis())["max_concurrency"] == 8
    assert spec.configured_capacity(Protocol(context_length=2048)) == {
        "kv_cache_free_gpu_memory_fraction": 0.9, "max_seq_len": 2048, "max_batch_size": "engine default (2048)"}
