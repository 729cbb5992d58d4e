"""Realized capacity is the smallest of the engine's own limits, each read from the engine, with
the configured value beside it. The log lines are those of the committed quickstart reference
run (outputs/quickstart/reference/arms/*/engine.log), verbatim."""
from stackbook.config.protocol import Protocol
from stackbook.engines.llama_cpp import LlamaCppAdapter, LlamaCppEngine
from stackbook.engines.vllm_cpu import VllmCpuAdapter, VllmCpuEngine

VLLM_ARGS = ("(APIServer pid=26410) INFO 11-30 21:25:38 [api_utils.py:286] non-default args: "
             "{'enable_auto_tool_choice': "
             "True, 'tool_call_parser': 'xlam', 'enable_prompt_tokens_details': True, "
             "'host': '127.0.0.1', 'port': 57633, "
             "'model': '$STACKBOOK_CACHE/models/smollm2-135m-instruct/hf-bf16', 'dtype': "
             "'bfloat16', 'max_model_len': 2048, "
             "'enforce_eager': True, 'served_model_name': ['smollm2-135m-instruct'], 'generation_config': 'vllm', "
             "'max_num_seqs': 4}\n")
VLLM_KV = ("(EngineCore pid=26423) INFO 11-30 21:25:58 [kv_cache_utils.py:2327] CPU KV cache size: 46,592 tokens, "
           "Maximum concurrency for 2,048 tokens per request: 22.75x\n")
LLAMA = ["0.00.403.066 I llama_kv_cache: size =  180.00 MiB (  2048 cells,  30 layers,  4/4 seqs), K (bf16):   "
         "90.00 MiB, V (bf16):   90.00 MiB\n",
         "0.00.290.393 I llama_context: kv_unified            = false\n",
         "0.00.567.759 I srv    load_model: initializing, n_slots = 4, n_ctx_slot = 2048, kv_unified = 'false'\n"]


def vllm_cpu(log: list[str], **spec):
    adapter = VllmCpuAdapter(VllmCpuEngine(kind="vllm_cpu", kv_cache_gib=1, **spec), None,
                             Protocol(context_length=2048), "m")
    adapter.log_lines = log
    return adapter.realized_capacity()


def test_a_kv_pool_behind_a_sequence_cap_serves_the_cap():
    """vLLM-CPU with --max-num-seqs 4: KV room for 22.75 sequences, 4 served; both limits shown."""
    got = vllm_cpu([VLLM_ARGS, VLLM_KV], max_num_seqs=4)
    assert (got["max_concurrency"], got["max_concurrency_bound_by"]) == (4, "sequence_cap")
    assert got["kv_max_concurrency"] == 22.75
    limits = got["limits"]
    assert (limits["sequence_cap"]["realized"], limits["sequence_cap"]["configured"]) == (4, 4)
    assert limits["kv_blocks"]["realized"] == 22.75
    assert (limits["context"]["realized"], limits["context"]["configured"]) == (2048, 2048)


def test_without_a_cap_the_kv_blocks_bound_and_an_unreported_cap_is_shown_not_used():
    got = vllm_cpu([VLLM_KV])
    assert (got["max_concurrency"], got["max_concurrency_bound_by"]) == (22.75, "kv_blocks")
    assert got["limits"]["sequence_cap"]["realized"] is None
    assert got["limits"]["sequence_cap"]["configured"] == "engine default"
    assert got["limits"]["sequence_cap"]["source"].startswith("not reported by the engine")


def test_nothing_reported_claims_no_capacity():
    got = vllm_cpu([])
    assert "max_concurrency" not in got and set(got["limits"]) == {"sequence_cap", "kv_blocks", "context"}


def test_llama_cpp_slots_kv_cells_and_context_from_its_log():
    adapter = LlamaCppAdapter(LlamaCppEngine(kind="llama_cpp", parallel=4), None, Protocol(context_length=2048), "m")
    adapter.log_lines = LLAMA
    adapter.port = 1  # nothing listens: /props gives nothing, the log alone speaks
    got = adapter.realized_capacity()
    assert (got["max_concurrency"], got["max_concurrency_bound_by"]) == (4, "sequence_cap")
    assert (got["limits"]["kv_blocks"]["realized"], got["limits"]["kv_blocks"]["configured"]) == (4, 4)
    assert got["limits"]["context"]["realized"] == 2048


def test_llama_cpp_names_the_kv_type_it_logs_as_the_protocol_does():
    """llama-server logs fp32 KV as f32: the realized KV precision reads fp32, so an fp32 arm
    compares alike with an engine that states none (the protocol's fp32)."""
    adapter = LlamaCppAdapter(LlamaCppEngine(kind="llama_cpp", parallel=4), None,
                              Protocol(context_length=2048, precision="fp32"), "m")
    adapter.log_lines = [LLAMA[0].replace("180.00", "360.00").replace("bf16", "f32"), *LLAMA[1:]]
    adapter.port = 1
    got = adapter.realized_capacity()
    assert (got["kv_type"], got["kv_type_logged"]) == ("fp32", "f32")
    adapter.log_lines = LLAMA
    assert adapter.realized_capacity()["kv_type"] == "bf16"
