"""`stackbook size` refuses what it cannot size with the option or the file and field named and a
fix, as JSON too with --json, and never with a traceback, whatever config and options it is given."""
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from stackbook.cli import app

runner = CliRunner()


def size(*args):
    return runner.invoke(app, ["size", *args])


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


LLAMA = {"model_type": "llama", "num_attention_heads": 8, "num_key_value_heads": 2, "hidden_size": 512,
         "num_hidden_layers": 4, "vocab_size": 1000, "intermediate_size": 1024, "max_position_embeddings": 4096}


@pytest.mark.parametrize("args, option, words", [
    (["--context", "-8192"], "--context", "at least 1"),
    (["--context", "0"], "--context", "at least 1"),
    (["--context", "300000"], "--context", "exceeds"),
    (["--tp", "0"], "--tp", "at least 1"),
    (["--tp", "3"], "--tp", "use one of [1, 2, 4, 8, 16, 32]"),
    (["--pool-gib", "-5"], "--pool-gib", "positive"),
    (["--workspace-gib", "-1"], "--workspace-gib", "zero GiB or more"),
    (["--weights", "q9"], "--weights", "known:"),
    (["--kv-dtype", "fp7"], "--kv-dtype", "use one of"),
    (["--hardware", "a100"], "--hardware", "close matches"),
    (["--context", "8k"], "--context", "should be a valid integer"),
    (["--no-such-option"], "--no-such-option", "No such option"),
])
def test_each_bad_option_is_refused_by_name_as_json(args, option, words):
    r = size("--model", "llama-3.1-8b", "--hardware", "a100-80gb", *args, "--json")
    assert r.exit_code == 2 and r.exception is None or isinstance(r.exception, SystemExit)
    err = json.loads(r.stdout)
    assert err["option"] == option and words in err["error"] and err["exit_code"] == 2


@pytest.mark.parametrize("text, words", [
    ("not json", "is not valid JSON"),
    ("[1, 2]", "must be a JSON object of fields, not a list"),
    (json.dumps({**LLAMA, "num_hidden_layers": -3}),
     "'num_hidden_layers' is -3; it must be a whole number of at least 1"),
    (json.dumps({k: v for k, v in LLAMA.items() if k != "num_hidden_layers"}), "has no 'num_hidden_layers'"),
    (json.dumps({**LLAMA, "num_key_value_heads": 3}), "not a multiple of num_key_value_heads 3"),
    (json.dumps({**LLAMA, "model_type": "falcon_h1", "mamba_d_ssm": 1024}), "model type 'falcon_h1' has 'mamba_"),
    (json.dumps({**LLAMA, "layer_types": ["full_attention"] * 3 + ["chunked_attention"]}), "['chunked_attention']"),
    (json.dumps({**LLAMA, "quantization_config": {"quant_method": "hqq"}}), "quant_method 'hqq'"),
])
def test_a_bad_config_file_is_refused_with_its_name_and_field(tmp_path, text, words):
    path = write(tmp_path, "config.json", text)
    r = size("--model", path, "--json")
    assert r.exit_code == 2, r.stdout
    err = json.loads(r.stdout)
    assert words in err["error"] and "config.json" in err["error"], err["error"]
    plain = size("--model", path, "--hardware", "a100-80gb")
    assert plain.exit_code == 2 and words in plain.stderr and "Traceback" not in plain.output


def test_the_fix_offered_for_a_missing_field_works(tmp_path):
    broken = {k: v for k, v in LLAMA.items() if k != "num_hidden_layers"}
    path = write(tmp_path, "config.json", json.dumps(broken))
    assert "add it to the config" in json.loads(size("--model", path, "--json").stdout)["error"]
    fixed = write(tmp_path, "config.json", json.dumps({**broken, "num_hidden_layers": 4}))
    assert size("--model", fixed, "--hardware", "a100-80gb", "--context", "4096").exit_code == 0


# --------------------------------------------------------------------------- generated input

MODEL_TYPES = ["llama", "mistral", "gemma2", "qwen3_next", "jamba", "nemotron_h", "deepseek_v3", "mixtral",
               "an_unknown_architecture", "falcon_h1"]
ANY_VALUE = st.one_of(st.integers(-4, 96), st.none(), st.booleans(), st.floats(allow_nan=True),
                      st.text(max_size=4), st.lists(st.integers(0, 3), max_size=3))
SMALL = st.one_of(st.integers(1, 64), ANY_VALUE)
FIELDS = ["num_attention_heads", "num_key_value_heads", "hidden_size", "num_hidden_layers", "vocab_size",
          "intermediate_size", "head_dim", "max_position_embeddings", "sliding_window", "layer_types",
          "attn_layer_period", "attn_layer_offset", "hybrid_override_pattern", "num_experts",
          "num_experts_per_tok", "mamba_d_state", "linear_num_value_heads", "quantization_config", "kv_lora_rank",
          "first_k_dense_replace", "decoder_sparse_step", "moe_layer_freq", "mlp_only_layers", "text_config"]


SMALL_BASES = [  # small valid configs of each layer style, so perturbed fields reach the deeper checks
    LLAMA,
    {**LLAMA, "model_type": "mistral", "sliding_window": 64},
    {**LLAMA, "model_type": "gemma2", "head_dim": 16, "sliding_window": 64},
    {**LLAMA, "model_type": "jamba", "attn_layer_period": 2, "attn_layer_offset": 1, "expert_layer_period": 2,
     "expert_layer_offset": 1, "num_experts": 2, "num_experts_per_tok": 1, "mamba_d_state": 4, "mamba_d_conv": 4,
     "mamba_expand": 2, "mamba_dt_rank": 8},
    {**LLAMA, "model_type": "nemotron_h", "hybrid_override_pattern": "M*-E", "mamba_num_heads": 4,
     "mamba_head_dim": 16, "ssm_state_size": 8, "n_groups": 2, "conv_kernel": 4, "n_routed_experts": 2,
     "num_experts_per_tok": 1, "moe_intermediate_size": 32, "head_dim": 64},
    {**LLAMA, "model_type": "qwen3_next", "layer_types": ["linear_attention", "full_attention"] * 2,
     "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8, "linear_value_head_dim": 8,
     "num_experts": 2, "num_experts_per_tok": 1, "moe_intermediate_size": 32, "head_dim": 64},
]


@st.composite
def configs(draw):
    if draw(st.booleans()):
        cfg = dict(draw(st.sampled_from(SMALL_BASES)))
        for f in draw(st.lists(st.sampled_from(FIELDS), unique=True, max_size=2)):
            cfg[f] = draw(SMALL)
        return cfg
    cfg = {"model_type": draw(st.sampled_from(MODEL_TYPES))}
    for f in draw(st.lists(st.sampled_from(FIELDS), unique=True, max_size=len(FIELDS))):
        cfg[f] = draw(SMALL)
    if draw(st.booleans()):
        cfg["layer_types"] = draw(st.lists(st.sampled_from(["full_attention", "sliding_attention", "linear_attention",
                                                            "mamba", "x"]), max_size=6))
    if draw(st.booleans()):
        cfg["hybrid_override_pattern"] = draw(st.text(alphabet="M*-E?", max_size=6))
    return cfg


OPTIONS = st.lists(st.one_of(
    st.tuples(st.just("--context"), st.integers(-10, 10**7).map(str)),
    st.tuples(st.just("--tp"), st.integers(-2, 70).map(str)),
    st.tuples(st.sampled_from(["--pool-gib", "--workspace-gib", "--activations-gib"]),
              st.sampled_from(["-5", "0", "1e-9", "nan", "inf", "2", "1e30"])),
    st.tuples(st.just("--weights"), st.sampled_from(["bf16", "fp8", "int4", "q4_k_m", "junk"])),
    st.tuples(st.just("--artifact-bytes"), st.sampled_from(["-1", "0", "1000", "99999999999999999999"])),
    st.tuples(st.just("--hardware"), st.sampled_from(["a100-80gb", "rtx-4090", "h100"])),
    st.tuples(st.sampled_from(["--context", "--tp", "--pool-gib"]), st.sampled_from(["8k", "", "1,000", "0x10"]))),
    max_size=4)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cfg=configs(), options=OPTIONS, as_json=st.booleans())
def test_no_generated_config_or_option_ends_in_a_traceback(cfg, options, as_json):
    """Also: a JSON answer is an error exactly when the exit code is 2, and exit 3 carries the
    shortfall."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "config.json"
        path.write_text(json.dumps(cfg))
        args = ["--model", str(path), *[x for pair in options for x in pair]] + (["--json"] if as_json else [])
        if "--hardware" not in args:
            args += ["--hardware", "a100-80gb"]  # not this-cpu: no bandwidth measurement per example
        r = size(*args)
    assert r.exception is None or isinstance(r.exception, SystemExit), (args, cfg, r.exception)
    assert r.exit_code in (0, 2, 3), (args, r.output)
    if as_json:
        out = json.loads(r.stdout)
        assert ("error" in out) == (r.exit_code == 2)
        if r.exit_code == 3:
            assert out["fits"] is False and out["shortfall_bytes"] > 0
