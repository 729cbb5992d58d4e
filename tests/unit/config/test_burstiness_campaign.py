"""campaigns/burstiness.yaml: one engine, one mean rate, the arrival variance as the declared
variable under test; its arms stay comparable with each other."""
import pytest
import yaml
from stackbook.analysis.fairness import fairness_table
from stackbook.config.errors import CampaignError
from stackbook.config.loading import load_campaign

PATH = "campaigns/burstiness.yaml"


def test_arms_differ_only_in_the_variance_of_their_arrivals():
    c = load_campaign(PATH)
    assert c.variables_under_test == ["arrival"]
    protocols = [c.protocol_for(a) for a in c.arms]
    # the scheduled squared CV of the gaps: 0, 0.25, 1, 4, in arm order
    assert [p.arrival.arrival_law().scheduled_scv for p in protocols] == [0.0, 0.25, 1.0, 4.0]
    assert [p.arrival.arrival_law().poisson for p in protocols] == [False, False, True, False]
    assert len({tuple(p.arrival.rates) for p in protocols}) == 1 and len(protocols[0].arrival.rates) == 1
    # everything else is the same protocol and the same single-slot engine
    rest = [p.model_dump(exclude={"arrival"}) for p in protocols]
    assert all(r == rest[0] for r in rest)
    assert all(a.engine == c.arms[0].engine for a in c.arms)
    assert c.arms[0].engine.kind == "llama_cpp"
    assert (c.arms[0].engine.parallel, c.arms[0].engine.threads) == (1, 1)
    # short fixed lengths: the service time barely varies
    w = protocols[0].workload
    assert w.prompt_tokens.bounds()[0] == w.prompt_tokens.bounds()[1]
    assert w.output_tokens.bounds()[0] == w.output_tokens.bounds()[1]


def test_every_arm_runs_the_same_point():
    c = load_campaign(PATH)
    names = {tuple(lv["level"] for lv in c.protocol_for(a).arrival.load_levels()) for a in c.arms}
    assert len(names) == 1


def test_arms_are_comparable_with_the_arrival_declared():
    c = load_campaign(PATH)
    point = c.protocol_for(c.arms[0]).arrival.load_levels()[0]["level"] + "-r0"

    def arms(templates):
        # realized rates and windows differ by arm (a short bursty sample strays from its mean)
        return {a.name: {"arm": a, "engine": {"identity": {"chat_template_sha256": t}, "model": {"name": "m"}},
                         "results": {"sweep": {"points": {point: {"rate": 1.0, "achieved_rate_rps": 1.0 + 0.2 * i,
                                                                   "phases_sent": {"measure": 10 + i}}}}}}
                for i, (a, t) in enumerate(zip(c.arms, templates))}

    assert fairness_table(c, arms(["t"] * 4))["comparable"].all()
    # anything not declared still makes an arm not comparable
    f = fairness_table(c, arms(["t", "t", "t", "other"]))
    assert list(f["comparable"]) == [True, True, True, False]
    assert f.loc["gamma-4", "differs"] == "chat_template"


def test_without_the_declaration_the_arms_are_refused(tmp_path):
    data = yaml.safe_load(open(PATH))
    data["variables_under_test"] = []
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(CampaignError, match="variables_under_test"):
        load_campaign(path)
