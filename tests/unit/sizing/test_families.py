"""Every architecture family `stackbook size` accepts, against independent numbers: each config is
built by transformers' own config class (defaults mirror the reference model; the keyword
arguments are the reference model's public config.json where the defaults are another size), its
parameters against the count transformers reports for the same config on the meta device, its KV
and recurrent state against the hand arithmetic in the comments. Within 0.1%."""
import json

import pytest
from typer.testing import CliRunner

from stackbook.cli import app

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

NEMOTRON_H_8B = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"
LLAMA_31_8B = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                   num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072)
K = 8192  # the context every figure below is for

# family: (model type, config keyword arguments, layer schedule, KV bytes per sequence at 8K,
#          state bytes per sequence), the bytes worked out by hand (bf16 KV = 2 B, fp32 SSM state = 4 B,
#          bf16 convolution window = 2 B):
FAMILIES = {
    # dense GQA, Llama 3.1 8B: 32 layers x K and V x 8 KV heads x 128 dims x 2 B = 131,072 B a token
    "dense (Llama 3.1 8B)": ("llama", LLAMA_31_8B, {"full_attention": 32, "dense_ffn": 32}, K * 131_072, 0),
    # MoE, Mixtral 8x7B (the class defaults): attention as Llama's, experts do not touch the KV
    "MoE (Mixtral 8x7B)": ("mixtral", {}, {"full_attention": 32, "moe_ffn": 32}, K * 131_072, 0),
    # MLA, DeepSeek-V3 (defaults; 163,840 positions as shipped): 61 layers x (512 latent + 64 rope) x 2 B
    "MLA (DeepSeek-V3)": ("deepseek_v3", {"max_position_embeddings": 163840},
                          {"full_attention": 61, "dense_ffn": 3, "moe_ffn": 58}, K * 61 * 576 * 2, 0),
    # uniform sliding window, Mistral 7B v0.1: every layer keeps min(8192, 4096) tokens of 131,072 B
    "sliding, uniform (Mistral 7B v0.1)": ("mistral", {"sliding_window": 4096},
                                           {"sliding_attention": 32, "dense_ffn": 32}, 4096 * 131_072, 0),
    # alternating, Gemma 2 (2B defaults): 13 global layers x 8192 + 13 local x 4096 tokens, each
    # layer-token 2 x 4 KV heads x 256 dims x 2 B = 4,096 B
    "sliding, alternating (Gemma 2)": ("gemma2", {}, {"full_attention": 13, "sliding_attention": 13, "dense_ffn": 26},
                                       13 * K * 4096 + 13 * 4096 * 4096, 0),
    # 5 local : 1 global, Gemma 3 (1B-4B text defaults): 4 global x 8192 + 22 local x 4096 tokens
    "sliding, 5:1 (Gemma 3)": ("gemma3_text", {}, {"full_attention": 4, "sliding_attention": 22, "dense_ffn": 26},
                               4 * K * 4096 + 22 * 4096 * 4096, 0),
    # Gated DeltaNet, Qwen3-Next 80B-A3B: 12 full layers x 2 x 2 KV heads x 256 x 2 B = 24,576 B a token;
    # 36 linear layers x (32 value heads x 128 x 128 x 4 B + 3 x (2 x 16 x 128 + 32 x 128) x 2 B)
    "Gated DeltaNet (Qwen3-Next 80B-A3B)": ("qwen3_next", {}, {"full_attention": 12, "linear_attention": 36,
                                                             "moe_ffn": 48},
                                            K * 24_576, 36 * (32 * 128 * 128 * 4 + 3 * (2 * 16 * 128 + 32 * 128) * 2)),
    # Mamba hybrid, Jamba v0.1: attention every 8th layer from 4 (4 layers x 2 x 8 x 128 x 2 B = 16,384 B
    # a token); 28 Mamba layers x (8192 inner x 16 state x 4 B + 3 x 8192 x 2 B)
    "Mamba hybrid (Jamba v0.1)": ("jamba", {}, {"full_attention": 4, "mamba": 28, "dense_ffn": 16, "moe_ffn": 16},
                                  K * 16_384, 28 * (8192 * 16 * 4 + 3 * 8192 * 2)),
    # Mamba-2 hybrid, Nemotron-H 8B: 4 attention layers x 16,384 B a token; 24 Mamba-2 layers x
    # (128 heads x 64 x 128 state x 4 B + 3 x (8192 + 2 x 8 groups x 128) x 2 B); 24 MLP layers hold nothing
    "Mamba-2 hybrid (Nemotron-H 8B)": ("nemotron_h", dict(
        hybrid_override_pattern=NEMOTRON_H_8B, num_hidden_layers=52, hidden_size=4096, intermediate_size=21504,
        num_attention_heads=32, num_key_value_heads=8, head_dim=128, mamba_num_heads=128, mamba_head_dim=64,
        ssm_state_size=128, n_groups=8, conv_kernel=4, vocab_size=131072, max_position_embeddings=8192),
        {"full_attention": 4, "mamba": 24, "dense_ffn": 24}, K * 16_384, 24 * (8192 * 128 * 4 + 3 * 10240 * 2)),
}


def reference_count(config) -> int:
    """transformers' own count: the causal LM built on the meta device, each tensor once."""
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def sized(tmp_path, model_type, kwargs, *options):
    config = transformers.AutoConfig.for_model(model_type, **kwargs)
    d = tmp_path / model_type
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(config.to_dict(), default=str))
    r = CliRunner().invoke(app, ["size", "--model", str(d), "--hardware", "a100-80gb", "--context", str(K),
                                 *options, "--json"])
    assert r.exit_code in (0, 3), r.output
    return config, json.loads(r.stdout), r.exit_code


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_family_against_transformers_and_the_hand_arithmetic(tmp_path, family):
    model_type, kwargs, schedule, kv_8k, state = FAMILIES[family]
    config, out, code = sized(tmp_path, model_type, kwargs)
    assert out["parameters_total"] == pytest.approx(reference_count(config), rel=1e-3)
    assert "built on the meta device" in out["parameters_source"]
    assert {k: v for k, v in out["layer_schedule"].items() if k != "layers"} == schedule
    assert out["kv_bytes_per_sequence"] == pytest.approx(kv_8k, rel=1e-3)
    assert out["state_bytes_per_sequence"] == pytest.approx(state, rel=1e-3)
    per_seq = kv_8k + state
    assert out["bytes_per_sequence"] == pytest.approx(per_seq, rel=1e-3)
    # 80e9 bytes less the weights and 1 GiB of workspace and activations, in whole sequences
    pool = 80e9 - 2 * out["parameters_total"] - 2**30
    assert out["max_live_sequences"] == max(0, int(pool // per_seq))
    assert code == (0 if out["fits"] else 3) and out["fits"] == (pool >= per_seq)


def test_active_parameters_follow_the_router_top_k(tmp_path):
    config, out, _ = sized(tmp_path, "mixtral", {})
    # Mixtral: 2 of 8 experts a token; experts are 32 layers x 8 x 3 x 4096 x 14336 parameters
    experts = 32 * 8 * 3 * 4096 * 14336
    assert out["parameters_total"] - out["parameters_active"] == experts * 6 // 8
    assert out["parameters_by_part"]["expert_mlp"] == experts


def test_gemma2_ties_its_head_and_counts_its_four_norms(tmp_path):
    config, out, _ = sized(tmp_path, "gemma2", {})
    assert config.tie_word_embeddings and out["parameters_total"] == reference_count(config) == 2_614_341_888
    parts = out["parameters_by_part"]     # one 256,000 x 2,304 embedding, read again as the head
    assert parts["tied_head"] is True and parts["lm_head"] == 0 and parts["embeddings"] == 256_000 * 2304


def test_the_shipped_fp8_precision_is_the_default_and_weights_still_overrides(tmp_path):
    kwargs = {**LLAMA_31_8B, "quantization_config": {"quant_method": "fp8", "fmt": "e4m3"}}
    config, out, _ = sized(tmp_path, "llama", kwargs)
    assert out["weights_precision"] == "fp8" and out["weights_bytes"] == 8_030_261_248   # 1 byte a parameter
    assert "quantization_config fp8" in out["weights_precision_source"]
    _, given, _ = sized(tmp_path, "llama", kwargs, "--weights", "bf16")
    assert given["weights_bytes"] == 2 * 8_030_261_248 and given["weights_precision_source"] == "given (--weights)"


@pytest.mark.parametrize("q, precision", [({"quant_method": "awq", "bits": 4}, "int4"),
                                          ({"quant_method": "gptq", "bits": 8}, "int8"),
                                          ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "int4"),
                                          ({"quant_method": "mxfp4"}, "mxfp4")])
def test_each_quantization_method_sets_its_precision(q, precision):
    from stackbook.model.checkpoint import shipped_precision
    assert shipped_precision({"quantization_config": q})[0] == precision


def test_a_window_layer_holds_the_whole_context_below_the_window(tmp_path):
    _, out, _ = sized(tmp_path, "mistral", {"sliding_window": 4096}, "--context", "1000")
    assert out["kv_bytes_per_sequence"] == 1000 * 131_072      # min(1000, 4096) tokens on every layer


def _safetensors(path, tensors: dict):
    """A safetensors file whose header lists `tensors` (name: (dtype, shape)); data zeros."""
    import struct
    sizes = {"BF16": 2, "F8_E4M3": 1, "F32": 4}
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        n = sizes[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    blob = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + bytes(offset))


def test_a_model_directory_is_sized_at_its_checkpoint_bytes_as_shipped(tmp_path):
    kwargs = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=1000, max_position_embeddings=4096,
                  quantization_config={"quant_method": "fp8"})
    config = transformers.AutoConfig.for_model("llama", **kwargs)
    d = tmp_path / "fp8-model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config.to_dict(), default=str))
    # fp8 projections with fp32 scales, bf16 embeddings: 64 x 128 x 1 + 2 x 4 + 1000 x 64 x 2 bytes
    _safetensors(d / "model.safetensors", {"model.layers.0.mlp.up_proj.weight": ("F8_E4M3", (128, 64)),
                                           "model.layers.0.mlp.up_proj.weight_scale_inv": ("F32", (2,)),
                                           "model.embed_tokens.weight": ("BF16", (1000, 64))})
    r = CliRunner().invoke(app, ["size", "--model", str(d), "--hardware", "a100-80gb", "--context", "4096", "--json"])
    out = json.loads(r.stdout)
    assert out["weights_bytes"] == 128 * 64 + 2 * 4 + 1000 * 64 * 2
    assert out["weights_precision"] == "fp8" and "safetensors bytes" in out["weights_precision_source"]
    assert out["parameters_total"] == reference_count(config)      # the definition's count, not the file's


@pytest.mark.parametrize("model_type, kwargs", [
    ("gemma2", {}), ("gemma3_text", {"sliding_window_pattern": 6}), ("cohere2", {"sliding_window_pattern": 4}),
    ("qwen2", {"use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 20}),
    ("qwen2", {}), ("qwen3_next", {})])
def test_the_schedule_read_from_a_bare_config_matches_the_layer_types_transformers_derives(model_type, kwargs):
    """A config as written (no layer_types, as older config.json files are) gives the schedule the
    model's own config class derives."""
    from stackbook.model.schedule import schedule_from_config
    config = transformers.AutoConfig.for_model(model_type, **kwargs)
    bare = {**{k: v for k, v in config.to_dict().items() if k != "layer_types"}, **kwargs}  # the file's own keys
    if model_type == "qwen3_next":
        bare["full_attention_interval"] = 4       # early Qwen3-Next configs said it so
    assert list(schedule_from_config(bare, config.num_hidden_layers).mixers) == config.layer_types


def test_phi3_keeps_its_window_on_every_layer(tmp_path):
    _, out, _ = sized(tmp_path, "phi3", {"sliding_window": 2047, "max_position_embeddings": 4096}, "--context", "4096")
    # 32 layers x min(4096, 2047) tokens x 2 x 32 KV heads x 96 dims x 2 B
    assert out["layer_schedule"]["sliding_attention"] == 32
    assert out["kv_bytes_per_sequence"] == 32 * 2047 * 2 * 32 * 96 * 2


def test_a_directory_with_only_the_safetensors_index_is_sized_at_its_total_size(tmp_path):
    config = transformers.AutoConfig.for_model("llama", **LLAMA_31_8B)
    d = tmp_path / "index-only"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config.to_dict(), default=str))
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 16_060_522_496},
                                                               "weight_map": {}}))
    r = CliRunner().invoke(app, ["size", "--model", str(d), "--hardware", "a100-80gb", "--json"])
    out = json.loads(r.stdout)
    assert out["weights_bytes"] == 16_060_522_496 == 2 * 8_030_261_248   # Llama 3.1 8B's bf16 shards
    assert out["parameters_total"] == 8_030_261_248
