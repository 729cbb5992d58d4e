"""What transformers answers about a config is kept on disk, so later processes skip its import."""
import pytest
from stackbook.model import definition


def test_an_answer_is_computed_once_and_read_back(tmp_path, monkeypatch):
    monkeypatch.setenv("STACKBOOK_CACHE", str(tmp_path))
    calls = []

    def compute():
        calls.append(1)
        return {"hidden_size": 576}

    first = definition._remembered("config", '{"a": 1}', ("transformers",), compute)
    again = definition._remembered("config", '{"a": 1}', ("transformers",), compute)
    other = definition._remembered("config", '{"a": 2}', ("transformers",), compute)
    assert first == again == other == {"hidden_size": 576} and len(calls) == 2
    assert len(list((tmp_path / "definitions").glob("config-*.json"))) == 2


def test_a_refusal_is_not_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("STACKBOOK_CACHE", str(tmp_path))

    def refuse():
        raise definition.DefinitionError("config: hidden_size must be positive")

    for _ in range(2):
        with pytest.raises(definition.DefinitionError):
            definition._remembered("config", '{"bad": 1}', ("transformers",), refuse)
    assert not list((tmp_path / "definitions").glob("*.json"))


def test_the_count_read_back_equals_the_count_built(tmp_path, monkeypatch):
    monkeypatch.setenv("STACKBOOK_CACHE", str(tmp_path))
    cfg = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000}
    built = definition.count_parameters(cfg)
    definition._count.cache_clear()
    assert definition.count_parameters(cfg) == built and built["total"] > 0
