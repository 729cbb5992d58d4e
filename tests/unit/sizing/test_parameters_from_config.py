"""The parameter count from a bare config.json, against published counts, and `size --json` for
every verdict, "does not fit" included."""
import json

import pytest
from typer.testing import CliRunner

from stackbook.cli import app
from stackbook.model.geometry import geometry_for, model_catalog
from stackbook.model.parameters import parameters_from_config

# Published totals (models.yaml sources; research/sizing.md for the Qwen3.8-27B breakdown).
PUBLISHED = {"smollm2-135m": 134_515_008, "llama-3.1-8b": 8_030_261_248, "qwen3.8-27b": 26_896_000_000,
             "qwen3-next-80b-a3b": 80_000_000_000, "deepseek-v3": 671_000_000_000,
             "gpt-oss-120b": 116_800_000_000}


@pytest.mark.parametrize("model", sorted(PUBLISHED))
def test_the_count_from_geometry_is_within_one_percent(model):
    counted = parameters_from_config(model_catalog()[model]["config"])["total"]
    assert counted == pytest.approx(PUBLISHED[model], rel=0.01)


def test_the_parts_add_up_as_the_notes_break_them_down():
    parts = parameters_from_config(model_catalog()["qwen3.8-27b"]["config"])["parts"]
    assert parts["embeddings"] == parts["lm_head"] == 248320 * 5120           # untied: 1.271 B each
    assert parts["attention"] == 16 * 104_858_112                              # 104.9 M per layer, gated q
    assert parts["linear_attention"] == 48 * 115_876_064                       # 115.9 M per Gated DeltaNet
    assert parts["dense_mlp"] == 64 * 267_386_880                              # 267.4 M per MLP
    tied = parameters_from_config(model_catalog()["smollm2-135m"]["config"])
    assert tied["parts"]["lm_head"] == 0 and tied["total"] == 134_515_008     # exact, tied embeddings
    mla = parameters_from_config(model_catalog()["deepseek-v3"]["config"])
    assert mla["active"] == pytest.approx(37e9, rel=0.02)                     # 37 B active of 671 B


def _bare_config(tmp_path, model, tag=""):
    d = tmp_path / (model + tag)
    d.mkdir()
    (d / "config.json").write_text(json.dumps(model_catalog()[model]["config"]))
    return d / "config.json"


def test_a_bare_config_json_is_counted_by_transformers_definition(tmp_path):
    g = geometry_for(_bare_config(tmp_path, "llama-3.1-8b"))
    assert g.num_parameters == 8_030_261_248                                  # the published count, exactly
    assert "LlamaForCausalLM built on the meta device" in g.parameters_source


def _size(*args, code=0):
    r = CliRunner().invoke(app, ["size", *args, "--json"])
    assert r.exit_code == code, r.output
    return json.loads(r.stdout)


def test_a_model_that_does_not_fit_exits_3_with_the_shortfall_and_its_kv(tmp_path):
    out = _size("--model", str(_bare_config(tmp_path, "deepseek-v3")), "--hardware", "h100-sxm", "--context", "4096",
                code=3)
    assert out["fits"] is False and out["parameters_total"] == 671_026_404_352   # transformers' own count
    assert out["weights_precision"] == "fp8" and out["weights_bytes"] == 671_026_404_352  # as shipped, 1 B each
    # 61 MLA layers x (512 latent + 64 rope) x 2 bytes = 70,272 per token; x 4096 tokens.
    assert out["kv_bytes_per_token"] == 70_272 and out["kv_bytes_per_sequence"] == 4096 * 70_272
    # one sequence and the weights against 80e9 bytes less 1 GiB of workspace and activations
    assert out["shortfall_bytes"] == 671_026_404_352 + 4096 * 70_272 + 2**30 - 80_000_000_000
    assert out["cards_needed"] == out["smallest_tensor_parallel_that_fits"] == 16
    # per card: 80e9 - 671.0e9 / 16 - 1 GiB = 36.99e9 bytes, the latent replicated on each: 128 of 288 MB
    assert out["max_live_sequences_at_cards_needed"] == 128
    bf16 = _size("--model", str(_bare_config(tmp_path, "deepseek-v3", "bf16")), "--hardware", "h100-sxm",
                 "--context", "4096", "--weights", "bf16", code=3)
    assert bf16["weights_bytes"] == 2 * 671_026_404_352 and bf16["cards_needed"] == 32
    small = _size("--model", "qwen3.8-27b", "--hardware", "rtx-4090", code=3)  # a verdict, not a refusal
    assert small["fits"] is False and small["cards_needed"] == 4
    fits = _size("--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--context", "4096")
    assert fits["fits"] is True and fits["cards_needed"] == 1 and fits["shortfall_bytes"] == 0
