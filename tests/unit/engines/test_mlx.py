"""MLX's adapter without starting it: launch command, request dialect (what mlx_lm's server
reads from a request body), end-of-sequence ids read from a checkpoint, and its capacity
statements for SmolLM2-135M's geometry (23,040 bytes of bf16 KV per token)."""
import json

import pytest
from stackbook.config.protocol import Protocol
from stackbook.engines.mlx import MlxAdapter, MlxEngine, eos_token_ids
from stackbook.engines.spec import CapacityBasis
from stackbook.model.artifacts import ModelArtifacts
from stackbook.model.geometry import ModelGeometry

SMOLLM2 = ModelGeometry(name="smollm2-135m", architecture="LlamaForCausalLM", num_layers=30, hidden_size=576,
                        num_attention_heads=9, num_kv_heads=3, head_dim=64, vocab_size=49152, max_context=8192,
                        num_parameters=134_515_008)


@pytest.fixture
def artifacts(tmp_path) -> ModelArtifacts:
    """A checkpoint directory with SmolLM2's end-of-sequence facts: config and generation config say
    id 2, the tokenizer's eos token <|im_end|> is the added token 2, <|endoftext|> is 0."""
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps({"eos_token_id": 2, "bos_token_id": 1}))
    (hf / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 0]}))
    (hf / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>", "chat_template": "{{x}}"}))
    (hf / "tokenizer.json").write_text(json.dumps({"added_tokens": [{"id": 0, "content": "<|endoftext|>"},
                                                                   {"id": 2, "content": "<|im_end|>"}],
                                                  "model": {"vocab": {"<|im_end|>": 2, "a": 5}}}))
    return ModelArtifacts("m", hf, None)


@pytest.fixture
def python(tmp_path):
    path = tmp_path / "bin" / "python"
    path.parent.mkdir()
    path.write_text("#!/bin/sh\n")
    return str(path)


def test_command(artifacts, python):
    spec = MlxEngine(kind="mlx", decode_concurrency=3, prompt_cache_size=0, prompt_cache_bytes=2**30,
                     python=python, extra_args=["--prefill-step-size", "512"])
    a = MlxAdapter(spec, artifacts, Protocol(), "served")
    assert a.command() == [
        python, "-m", "mlx_lm", "server", "--model", str(artifacts.hf_dir), "--host", "127.0.0.1",
        "--port", str(a.port), "--decode-concurrency", "3", "--prompt-cache-size", "0",
        "--prompt-cache-bytes", str(2**30), "--prefill-step-size", "512"]
    assert a.env() == {"HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    assert a.metrics_path is None and a.health_path == "/health"
    # Without prompt-cache settings the engine's defaults apply and no flag is passed.
    plain = MlxAdapter(MlxEngine(kind="mlx", python=python), artifacts, Protocol(), "served").command()
    assert "--prompt-cache-size" not in plain and plain[plain.index("--decode-concurrency") + 1] == "4"


def test_request_dialect(artifacts, python):
    a = MlxAdapter(MlxEngine(kind="mlx", python=python), artifacts, Protocol(decoding={"seed": 5}), "m")
    # A seeded request leaves mlx_lm's batch: the seed is not sent, and the identity says so.
    assert a.sampling_fields(Protocol().decoding.resolved()) == {
        "temperature": 0.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0}
    assert set(a.fields_not_sent) == {"seed"}
    # No ignore_eos / min_tokens in mlx_lm: the end-of-sequence tokens are made unreachable instead.
    assert a.output_length_fields(9) == {"max_tokens": 9, "logit_bias": {"0": -1e9, "2": -1e9}}
    assert a.length_control.startswith("logit_bias")


def test_eos_ids_from_config_generation_config_and_tokenizer(artifacts, tmp_path):
    assert eos_token_ids(artifacts.hf_dir) == [0, 2]
    bare = tmp_path / "bare"
    bare.mkdir()
    assert eos_token_ids(bare) == []


def test_precision_must_be_the_checkpoint_dtype_for_weights_and_kv(artifacts, python):
    spec = MlxEngine(kind="mlx", python=python)
    with pytest.raises(ValueError, match=r"precision.weights must be one of \['bf16', 'fp16', 'fp32'\].*"
                                         r"kv_cache='fp8'"):
        MlxAdapter(spec, artifacts, Protocol(precision={"kv_cache": "fp8"}), "m").command()
    with pytest.raises(FileNotFoundError, match="mlx needs a Hugging Face model directory: set model.hf_path"):
        MlxAdapter(spec, ModelArtifacts("m", None, None), Protocol(), "m").command()


def test_a_precision_other_than_the_checkpoints_is_refused_since_mlx_cannot_cast(artifacts, python):
    spec = MlxEngine(kind="mlx", python=python)
    cfg = artifacts.hf_dir / "config.json"
    cfg.write_text(json.dumps({"eos_token_id": 2, "dtype": "bfloat16"}))
    with pytest.raises(ValueError, match=r"mlx serves the checkpoint's own dtype, bf16 \(its config.json\).*"
                                         r"give mlx a checkpoint in fp32 \(model.hf_path\), or name precision bf16"):
        MlxAdapter(spec, artifacts, Protocol(precision="fp32"), "m").command()
    assert "--model" in MlxAdapter(spec, artifacts, Protocol(precision="bf16"), "m").command()
    cfg.write_text(json.dumps({"eos_token_id": 2, "torch_dtype": "float32"}))  # the older key
    assert "--model" in MlxAdapter(spec, artifacts, Protocol(precision="fp32"), "m").command()


def test_without_its_environment_it_says_how_to_install_it(artifacts, monkeypatch, tmp_path):
    monkeypatch.setenv("STACKBOOK_CACHE", str(tmp_path / "empty"))
    with pytest.raises(FileNotFoundError, match=r"mlx-0.32.4/bin/python is missing; .*tools/bootstrap.sh mlx\)"):
        MlxAdapter(MlxEngine(kind="mlx"), artifacts, Protocol(), "m").command()


def test_capacity_statements():
    spec = MlxEngine(kind="mlx", decode_concurrency=4)
    assert spec.configured_capacity(Protocol()) == {
        "decode_concurrency": 4, "context_per_sequence": "not enforced: mlx_lm has no context limit flag",
        "prompt_cache_size": "engine default (10)", "prompt_cache_bytes": "engine default (unbounded)"}
    got = spec.predicted_capacity(CapacityBasis(SMOLLM2, Protocol(context_length=2000), 16 * 2**30, 0, None, None))
    # 2,000 tokens round up to 8 steps of 256 = 2,048 cells x 23,040 bytes = 47,185,920 bytes per
    # sequence; 4 sequences = 188,743,680 bytes (180 MiB). No pool: nothing else is predicted.
    assert got["max_concurrency"] == 4
    assert got["kv_bytes_per_sequence_at_context"] == 47_185_920
    assert got["kv_bytes_all_sequences_at_context"] == 188_743_680
    assert spec.cache_pool_bytes() is None


def test_realized_capacity_reads_the_prompt_cache_lines(artifacts, python):
    a = MlxAdapter(MlxEngine(kind="mlx", python=python), artifacts, Protocol(), "m")
    got = a.realized_capacity()
    assert {k: got[k] for k in ("source", "kv_pool", "decode_concurrency")} == {
        "source": "mlx_lm server log", "kv_pool": "none reported: mlx_lm allocates each sequence's KV as it grows",
        "decode_concurrency": "not reported by the engine (set by --decode-concurrency)"}
    # No limit is reported, so no realized concurrency is claimed; the configured cap is shown.
    assert "max_concurrency" not in got and got["limits"]["sequence_cap"] == {
        "realized": None, "configured": 4, "unit": "sequences",
        "source": "not reported by the engine (mlx_lm logs no --decode-concurrency)"}
    a.log_lines = ["2026-11-30 17:20:01,004 - INFO - Prompt Cache: 1 sequences, 0.00 GB\n",
                   "2026-11-30 17:20:05,122 - INFO - Prompt Cache: 3 sequences, 0.02 GB\n"]
    got = a.realized_capacity()
    assert got["prompt_cache_sequences"] == 3 and got["prompt_cache_gb_max"] == 0.02
