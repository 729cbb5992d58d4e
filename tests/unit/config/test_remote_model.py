"""`model: {source: remote}`: a hosted model with no local weights, sized by its own tokenizer when
one is here; refused where an arm would need weights."""
import pytest
from stackbook.config.errors import CampaignError
from stackbook.config.loading import load_campaign
from stackbook.engines import adapter_for
from stackbook.model.artifacts import artifacts_for

REMOTE = """
name: hosted
model: {{name: gpt-x, source: remote{extra}}}
protocol:
  workload: {{kind: synthetic, prompt_tokens: 32, output_tokens: 8}}
  arrival: {{kind: closed_loop, concurrency: [1]}}
arms:
  - name: hosted
    engine: {{kind: {kind}, base_url: "https://api.example.com/v1"}}
"""


def tokenizer_dir(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    tok = Tokenizer(models.WordLevel({"[UNK]": 0, "hello": 1, "world": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    d = tmp_path / "tok"
    d.mkdir()
    tok.save(str(d / "tokenizer.json"))
    return d


def test_a_remote_model_validates_and_needs_no_weights(write_campaign, tmp_path):
    d = tokenizer_dir(tmp_path)
    c = load_campaign(write_campaign(REMOTE.format(kind="openai_endpoint",
                                                   extra=f", served_name: gpt-x-2026, tokenizer_path: {d}")))
    assert c.model.source == "remote" and c.model.tokenizer_path == str(d)
    a = adapter_for(c, c.arms[0])
    assert a.served_name == "gpt-x-2026" and a.artifacts is None
    art = artifacts_for(c.model)
    assert art.hf_dir == d and art.gguf is None
    c2 = load_campaign(write_campaign(REMOTE.format(kind="openai_endpoint", extra=""), name="c2.yaml"))
    assert adapter_for(c2, c2.arms[0]).served_name == "gpt-x" and artifacts_for(c2.model).hf_dir is None


@pytest.mark.parametrize("kind, extra, message", [
    ("llama_cpp", "", "arms[0].engine.kind: 'llama_cpp' serves local weights, and model.source 'remote' has none"),
    ("openai_endpoint", ", hf_path: /tmp", "source 'remote' serves no local weights: remove hf_path"),
    ("openai_endpoint", ", tokenizer_path: /tmp", "tokenizer_path '/tmp' has no tokenizer.json"),
])
def test_remote_model_mistakes_name_the_field_and_the_fix(write_campaign, kind, extra, message):
    text = REMOTE.format(kind=kind, extra=extra)
    if kind == "llama_cpp":
        text = text.replace(', base_url: "https://api.example.com/v1"', "")
    with pytest.raises(CampaignError) as err:
        load_campaign(write_campaign(text))
    assert message in str(err.value)


def test_served_name_belongs_to_remote(write_campaign):
    with pytest.raises(CampaignError) as err:
        load_campaign(write_campaign(REMOTE.format(kind="openai_endpoint", extra=", served_name: y")
                                     .replace("source: remote", "source: embedded")))
    assert "served_name and tokenizer_path belong to source: remote" in str(err.value)
