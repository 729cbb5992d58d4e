"""An arm's extra_args may not repeat a flag its adapter sets (the field to use is named), and an
engine listens beyond loopback only when the campaign says why."""
import pytest
from stackbook.config.errors import CampaignError
from stackbook.config.loading import parse_campaign
from stackbook.engines.registry import ENGINE_ADAPTERS


def campaign(engine: dict) -> dict:
    return {"name": "c", "model": {"source": "catalog", "catalog": "smollm2-135m"},
            "protocol": {"stages": ["sizing"]}, "arms": [{"name": "a", "engine": engine}]}


@pytest.mark.parametrize("engine, field", [
    ({"kind": "llama_cpp", "extra_args": ["--host", "0.0.0.0"]}, "engine.host (with engine.expose)"),
    ({"kind": "llama_cpp", "extra_args": ["--mlock", "-c", "100000"]}, "protocol.context_length"),
    ({"kind": "llama_cpp", "extra_args": ["--threads=8"]}, "engine.threads"),
    ({"kind": "vllm_cpu", "extra_args": ["--max-num-seqs", "9"]}, "engine.max_num_seqs"),
    ({"kind": "vllm_cpu", "extra_args": ["--kv-cache-dtype=fp8"]}, "protocol.precision.kv_cache"),
    ({"kind": "mlx", "extra_args": ["--port", "1"]}, "engine.port"),
    ({"kind": "vllm", "extra_args": ["-tp", "2"]}, "engine.tensor_parallel_size"),
    ({"kind": "sglang", "extra_args": ["--context-length", "9"]}, "protocol.context_length"),
    ({"kind": "trtllm", "extra_args": ["--max_batch_size", "9"]}, "engine.max_batch_size"),
])
def test_a_managed_flag_in_extra_args_names_the_field_to_use(engine, field):
    with pytest.raises(CampaignError) as err:
        parse_campaign(campaign(engine))
    msg = str(err.value)
    assert "arms[0].engine.extra_args" in msg and f"from {field}" in msg and "set that field instead" in msg


def test_flags_the_adapter_does_not_set_pass():
    c = parse_campaign(campaign({"kind": "llama_cpp", "extra_args": ["--mlock", "--model-draft=d.gguf"]}))
    assert c.arms[0].engine.extra_args == ["--mlock", "--model-draft=d.gguf"]


def test_every_launching_kind_names_its_listening_flags():
    for adapter in ENGINE_ADAPTERS:
        flags = adapter.spec_model.managed_flags
        if adapter.spec_model.serves_local_weights:
            assert "--host" in flags and "--port" in flags, adapter.kind


def test_a_server_beyond_loopback_needs_a_reason():
    with pytest.raises(CampaignError, match=r"arms\[0\].engine: host '0.0.0.0' makes the engine reachable .*expose"):
        parse_campaign(campaign({"kind": "llama_cpp", "host": "0.0.0.0"}))
    with pytest.raises(CampaignError, match="expose"):
        parse_campaign(campaign({"kind": "llama_cpp", "host": "10.0.0.5", "expose": "  "}))
    c = parse_campaign(campaign({"kind": "llama_cpp", "host": "0.0.0.0", "expose": "load from a second host"}))
    assert c.arms[0].engine.expose == "load from a second host"
    assert parse_campaign(campaign({"kind": "llama_cpp", "host": "localhost"})).arms[0].engine.expose is None
