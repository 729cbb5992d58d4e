"""Decoding presets belong to the model: the catalog's published values, and the thinking preset's
reasoning switch sent through the chat template and stated in the passport."""
from stackbook.config.loading import parse_campaign
from stackbook.evidence.files import read_json
from stackbook.run_checks.passport import write_passport
from stackbook.evidence.rundir import RunDir


def seed(preset: str, **model):
    return parse_campaign({"name": "s", "model": model or {"source": "catalog", "catalog": "qwen3.8-27b"},
                           "hardware": {"accelerator": "a100-80gb"},
                           "protocol": {"stages": ["sizing"], "decoding": {"preset": preset, "seed": 3}},
                           "arms": [{"name": "a", "engine": {"kind": "vllm"}}]})


def test_the_seed_models_published_presets():
    thinking = seed("thinking").protocol.decoding
    assert thinking.resolved() == {"temperature": 1.0, "top_p": 0.95, "top_k": 20, "min_p": 0.0,
                                   "repetition_penalty": 1.0, "seed": 3}
    assert thinking.template_fields() == {"chat_template_kwargs": {"enable_thinking": True}}
    instruct = seed("instruct").protocol.decoding
    assert (instruct.resolved()["temperature"], instruct.resolved()["top_p"], instruct.resolved()["top_k"]) == \
        (0.7, 0.8, 20)
    assert instruct.template_fields() == {"chat_template_kwargs": {"enable_thinking": False}}
    assert seed("greedy").protocol.decoding.template_fields() == {}


def test_a_model_without_published_presets_uses_the_workbooks_and_switches_nothing():
    d = seed("thinking", name="smollm2-135m-instruct", source="embedded").protocol.decoding
    assert d.model_presets == {} and d.template_fields() == {}
    assert d.describe()["preset_source"] == "the workbook's preset (the model publishes none in the catalog)"
    assert seed("greedy").protocol.decoding.model_presets  # a campaign's presets are its own, not a shared default
    assert parse_campaign({"name": "t", "arms": [{"name": "a", "engine": {"kind": "llama_cpp"}}]}
                          ).protocol.decoding.model_presets == {}


def test_the_passport_says_thinking_is_on(tmp_path):
    c = seed("thinking")
    arm = RunDir(tmp_path).arm("a").create()
    write_passport(c, c.arms[0], arm)
    d = read_json(arm.passport_json)["protocol"]["decoding"]
    assert d["reasoning_mode"] == "on: chat_template_kwargs.enable_thinking = true"
    assert d["preset_source"] == "the model's published preset (model catalog)"
    assert (d["preset"], d["temperature"], d["top_p"], d["top_k"]) == ("thinking", 1.0, 0.95, 20)
