"""What each engine says about its own build and kernels, parsed from the lines it printed here,
and speculative decoding read from the arm's engine arguments."""
import pytest
from stackbook.engines.llama_cpp import LlamaCppEngine, llama_cpu_features
from stackbook.engines.engine_process import EngineProcess
from stackbook.engines.vllm import logged_attention_backends
from stackbook.engines.vllm_cpu import VllmCpuEngine, vllm_cpu_kernels
from stackbook.engines.registry import adapter_class

# llama-server's start-up line on this host (quickstart run, 2026-11-30), verbatim.
LLAMA_SYSTEM_INFO_LINE = (
    "0.00.010.816 I cmn  common_param: system_info: n_threads = 1 (n_threads_batch = 1) / 2 | CPU : SSE3 = 1 | "
    "SSSE3 = 1 | AVX = 1 | AVX_VNNI = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 1 | AVX512_VBMI = 1 | "
    "AVX512_VNNI = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | \n")


def _adapter(kind, spec, lines):
    cls = adapter_class(kind)
    a = cls.__new__(cls)  # no launch: only the log is read
    a.spec, a.process = spec, EngineProcess()
    a.log_lines = lines
    return a


def test_llama_cpp_build_line_and_cpu_features_from_its_log():
    a = _adapter("llama_cpp", LlamaCppEngine(kind="llama_cpp"), ["other line\n", LLAMA_SYSTEM_INFO_LINE])
    assert a.build_line().startswith("CPU : SSE3 = 1 | SSSE3 = 1") and a.build_line().endswith("REPACK = 1")
    assert a.kernel_choice()["cpu_features"] == [
        "SSE3", "SSSE3", "AVX", "AVX_VNNI", "AVX2", "F16C", "FMA", "BMI2", "AVX512", "AVX512_VBMI", "AVX512_VNNI",
        "AVX512_BF16", "AMX_INT8", "LLAMAFILE", "OPENMP", "REPACK"]
    assert llama_cpu_features("CPU : AVX2 = 1 | AVX512 = 0 | ") == ["AVX2"]
    assert _adapter("llama_cpp", LlamaCppEngine(kind="llama_cpp"), ["no such line\n"]).build_line() is None


def test_vllm_build_line_and_logged_attention_backend():
    lines = ["(EngineCore pid=7042) INFO 11-30 17:42:38 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with "
             "config: model='m', speculative_config=None, device_config=cpu, seed=0\n",
             "INFO [cuda.py:291] Using FLASH_ATTN backend.\n", "INFO Using FLASH_ATTN backend.\n"]
    a = _adapter("vllm_cpu", VllmCpuEngine(kind="vllm_cpu"), lines)
    assert a.build_line() == "vLLM v0.32.0 V1 engine, device cpu"
    assert logged_attention_backends(lines) == ["FLASH_ATTN"]


@pytest.mark.parametrize("flags, dtype, library, isa", [
    ((True, True, True), "bf16", "vllm._C (AVX-512 with BF16)", "amx"),      # this host (Sapphire Rapids class)
    ((True, False, False), "bf16", "vllm._C_AVX512", "vec"),
    ((False, False, False), "fp32", "vllm._C_AVX2", "vec"),
    ((True, True, True), "fp32", "vllm._C (AVX-512 with BF16)", "vec"),      # AMX attention is bf16 only
])
def test_vllm_cpu_kernel_choice_follows_its_rule(flags, dtype, library, isa):
    k = vllm_cpu_kernels(*flags, dtype)
    assert (k["kernel_library"], k["attention_backend"], k["attention_isa"]) == (library, "CPU_ATTN", isa)


def test_speculative_decoding_comes_from_the_engine_arguments():
    assert VllmCpuEngine(kind="vllm_cpu").speculative_decoding() == \
        "none: no speculative-decoding flag among the engine arguments"
    spec = VllmCpuEngine(kind="vllm_cpu", extra_args=["--speculative-config", '{"method": "ngram"}'])
    assert spec.speculative_decoding() == '--speculative-config {"method": "ngram"}'
    draft = LlamaCppEngine(kind="llama_cpp", extra_args=["--model-draft=draft.gguf", "--draft-max", "8"])
    assert draft.speculative_decoding() == "--model-draft draft.gguf"
