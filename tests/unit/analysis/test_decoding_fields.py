"""The fairness table shows which decoding fields each arm's requests carried: a hosted API
refuses top_k, min_p and repetition_penalty, so its arm samples without them."""
from stackbook.analysis import comparison as analysis
from stackbook.config.loading import parse_campaign
from stackbook.config.protocol import Protocol
from stackbook.engines.llama_cpp import LlamaCppAdapter, LlamaCppEngine
from stackbook.engines.openai_endpoint import OpenAIEndpoint, OpenAIEndpointAdapter

CAMPAIGN = {"name": "t", "protocol": {"workload": {"kind": "synthetic", "prompt_tokens": 16, "output_tokens": 8}},
            "arms": [{"name": "local", "engine": {"kind": "llama_cpp"}},
                     {"name": "hosted", "engine": {"kind": "openai_endpoint", "base_url": "https://x.example/v1"}}]}


def test_the_fairness_table_says_which_decoding_fields_each_arm_sent():
    c = parse_campaign(CAMPAIGN)
    d = Protocol().decoding.resolved()
    local = LlamaCppAdapter(LlamaCppEngine(kind="llama_cpp"), None, Protocol(), "m")
    hosted = OpenAIEndpointAdapter(OpenAIEndpoint(kind="openai_endpoint", base_url="https://x.example/v1"), None,
                                   Protocol(), "m")
    arms = {"local": {"arm": c.arms[0],
                      "engine": {"identity": {}, "decoding_fields": local.honoured_decoding_fields(d)}},
            "hosted": {"arm": c.arms[1],
                       "engine": {"identity": {}, "decoding_fields": hosted.honoured_decoding_fields(d)}},
            }
    f = analysis.fairness_table(c, arms)
    assert f.loc["local", "decoding_not_sent"] == "none"
    assert f.loc["hosted", "decoding_not_sent"] == "min_p, repetition_penalty, top_k"
    assert f["comparable"].all()  # shown, not judged: under greedy decoding these fields are neutral
    del arms["local"]["engine"]["decoding_fields"]
    assert analysis.fairness_table(c, arms).loc["local", "decoding_not_sent"] == "not recorded"


def test_each_kind_names_what_it_leaves_out():
    from stackbook.engines.mlx import MlxAdapter, MlxEngine
    d = Protocol().decoding.resolved()
    mlx = MlxAdapter(MlxEngine(kind="mlx"), None, Protocol(), "m").honoured_decoding_fields(d)
    assert mlx["not_sent"] == {"seed": "mlx_lm serves a seeded request alone, outside the batch: sampling is unseeded"}
    hosted = OpenAIEndpointAdapter(OpenAIEndpoint(kind="openai_endpoint", base_url="https://x.example/v1",
                                                  engine_sampling=True), None, Protocol(), "m")
    assert hosted.honoured_decoding_fields(d) == {"sent": sorted(d), "not_sent": {}}
