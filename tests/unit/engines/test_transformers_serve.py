"""The Transformers adapter without starting it: its launch command (started where the served name
links to the checkpoint), its request dialect (every decoding setting inside `generation_config`,
an exact length by an end-of-sequence id no token has), and its capacity statements for
SmolLM2-135M's geometry (23,040 bytes of bf16 KV per token)."""
import json

import pytest
from stackbook.config.protocol import Protocol
from stackbook.engines.spec import CapacityBasis
from stackbook.engines.transformers_serve import TransformersAdapter, TransformersEngine, served_model_dir
from stackbook.model.artifacts import ModelArtifacts
from stackbook.model.geometry import ModelGeometry

SMOLLM2 = ModelGeometry(name="smollm2-135m", architecture="LlamaForCausalLM", num_layers=30, hidden_size=576,
                        num_attention_heads=9, num_kv_heads=3, head_dim=64, vocab_size=49152, max_context=8192,
                        num_parameters=134_515_008)


@pytest.fixture
def setting(tmp_path, monkeypatch):
    monkeypatch.setenv("STACKBOOK_CACHE", str(tmp_path / "cache"))
    hf = tmp_path / "hf-bf16"
    hf.mkdir()
    (hf / "config.json").write_text("{}")
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.write_text("#!/bin/sh\n")
    return ModelArtifacts("m", hf, None), str(python)


def adapter(setting, protocol=None, **spec) -> TransformersAdapter:
    artifacts, python = setting
    return TransformersAdapter(TransformersEngine(kind="transformers", python=python, **spec), artifacts,
                               protocol or Protocol(), "smollm2-135m-instruct")


def test_command_and_the_folder_it_starts_in(setting, tmp_path):
    a = adapter(setting, cb_num_blocks=64, cb_block_size=32, extra_args=["--compile"])
    assert a.command() == [
        setting[1], "-m", "transformers.cli.transformers", "serve", "smollm2-135m-instruct", "--host", "127.0.0.1",
        "--port", str(a.port), "--device", "auto", "--dtype", "bfloat16", "--continuous-batching",
        "--cb-num-blocks", "64", "--cb-block-size", "32", "--compile"]
    # The served name is a link to the checkpoint in the folder the server starts in: requests name
    # the model as the campaign does, and no machine path travels in a body.
    link = a.cwd() / "smollm2-135m-instruct"
    assert link.is_symlink() and link.resolve() == (tmp_path / "hf-bf16").resolve()
    assert served_model_dir(setting[0].hf_dir, "smollm2-135m-instruct") == a.cwd()
    plain = adapter(setting, continuous_batching=False, device="cpu").command()
    assert "--no-continuous-batching" in plain and plain[plain.index("--device") + 1] == "cpu"
    assert a.env()["HF_HUB_OFFLINE"] == "1" and a.metrics_path is None


def test_a_managed_flag_in_extra_args_is_refused():
    with pytest.raises(ValueError, match="--dtype.*protocol.precision.weights"):
        TransformersEngine(kind="transformers", extra_args=["--dtype", "float16"])


def test_request_dialect_carries_every_decoding_setting_in_generation_config(setting):
    a = adapter(setting, protocol=Protocol(decoding={"seed": 5}))
    fields = a.sampling_fields(a.protocol.decoding.resolved())
    assert (fields["temperature"], fields["top_p"], fields["seed"]) == (0.0, 1.0, 5)
    assert json.loads(fields["generation_config"]) == {"do_sample": False, "temperature": 0.0, "top_p": 1.0,
                                                        "top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0}
    assert a.honoured_decoding_fields(a.protocol.decoding.resolved()) == {
        "sent": ["min_p", "repetition_penalty", "seed", "temperature", "top_k", "top_p"], "not_sent": {}}
    # An exact length: no token has id -1, so generation runs to max_new_tokens.
    length = a.output_length_fields(12)
    assert length["max_tokens"] == 12
    config = json.loads(length["generation_config"])
    assert (config["max_new_tokens"], config["eos_token_id"], config["repetition_penalty"]) == (12, -1, 1.0)
    sampled = adapter(setting, protocol=Protocol(decoding={"preset": "instruct", "temperature": 0.7}))
    assert json.loads(sampled.generation_config())["do_sample"] is True


def test_precision_is_one_torch_dtype_for_weights_and_kv(setting):
    with pytest.raises(ValueError,
                       match=r"precision.weights must be one of \['bf16', 'fp16', 'fp32'\].*kv_cache='fp8'"):
        adapter(setting, protocol=Protocol(precision={"kv_cache": "fp8"})).command()
    with pytest.raises(FileNotFoundError, match="transformers needs a Hugging Face model directory"):
        TransformersAdapter(TransformersEngine(kind="transformers", python=setting[1]), ModelArtifacts("m", None, None),
                            Protocol(), "m").command()


def test_capacity_statements(setting):
    basis = CapacityBasis(SMOLLM2, Protocol(context_length=2048), 24 * 2**30, 0, None, None)
    paged = TransformersEngine(kind="transformers", cb_num_blocks=256, cb_block_size=32).predicted_capacity(basis)
    assert (paged["max_concurrency"], paged["kv_pool_tokens"], paged["kv_pool_bytes"]) == (4, 8192, 8192 * 23040)
    sized_at_start = TransformersEngine(kind="transformers").predicted_capacity(basis)
    assert sized_at_start["max_concurrency"] is None and "does not log its size" in sized_at_start["rule"]
    unbatched = TransformersEngine(kind="transformers", continuous_batching=False).predicted_capacity(basis)
    assert unbatched["kv_bytes_per_sequence_at_context"] == 2048 * 23040
    # The server logs no pool and no cap: nothing is claimed.
    realized = adapter(setting).realized_capacity()
    assert "max_concurrency" not in realized and realized["kv_pool"].startswith("not logged")


def test_the_attention_stated_is_the_librarys_pick_as_continuous_batching_turns_it(setting):
    batched, plain = adapter(setting), adapter(setting, continuous_batching=False)
    assert batched.attention({"attention": "sdpa"}).startswith("sdpa (the library's pick")
    assert batched.attention({"attention": "eager"}).startswith("paged|eager")
    assert batched.attention({"attention": "sdpa", "flash_attention": True}).startswith("flash_attention_2")
    assert plain.attention({"attention": "eager"}) == "eager (the library's pick for this checkpoint)"
    assert batched.attention({"attention_error": "no config"}) == "unknown: no config"
    assert adapter(setting, attn_implementation="sdpa").attention({"attention": "sdpa", "flash_attention": True}) \
        .startswith("sdpa")
