"""Campaign analysis on hand-made inputs: fairness, verdicts, frontier, SLO capacity."""
import pandas as pd
from stackbook.analysis import comparison as analysis
from stackbook.config.loading import parse_campaign
from stackbook.config.protocol import Slo

BASE = {
    "name": "t",
    "protocol": {"workload": {"kind": "synthetic", "prompt_tokens": 64, "output_tokens": 16}},
    "arms": [{"name": "a", "engine": {"kind": "llama_cpp"}}, {"name": "b", "engine": {"kind": "vllm_cpu"}}],
}


def arms_of(campaign, templates=("t1", "t1")):
    return {arm.name: {"arm": arm, "engine": {"identity": {"chat_template_sha256": t}, "model": {"name": "m"}},
                       "results": {}, "passport": {}} for arm, t in zip(campaign.arms, templates)}


def test_identical_arms_are_comparable():
    c = parse_campaign(BASE)
    f = analysis.fairness_table(c, arms_of(c))
    assert f["comparable"].all()


def test_a_different_chat_template_is_not_comparable():
    c = parse_campaign(BASE)
    f = analysis.fairness_table(c, arms_of(c, ("t1", "t2")))
    assert list(f["comparable"]) == [True, False]
    assert f.loc["b", "differs_from_a"] == "chat_template"


def test_a_declared_variable_keeps_the_arm_comparable():
    data = {**BASE, "variables_under_test": ["decoding.temperature"],
            "arms": [BASE["arms"][0], {**BASE["arms"][1], "protocol_overrides": {"decoding.temperature": 0.7}}]}
    c = parse_campaign(data)
    assert c.protocol_for(c.arms[1]).decoding.resolved()["temperature"] == 0.7
    f = analysis.fairness_table(c, arms_of(c))
    assert f["comparable"].all()


def frame():
    rows = []
    for arm, label, pts in [("fast-tail", "accepted", [(1, 40, 1000, 1.0), (4, 120, 6000, 0.5)]),
                            ("steady", "accepted", [(1, 45, 900, 1.0), (4, 100, 2500, 1.0)]),
                            ("held", "HOLD", [(1, 500, 100, 1.0), (4, 900, 200, 1.0)])]:
        for c, tp, p99, att in pts:
            rows.append({"arm": arm, "label": label, "point": f"c{c}-r0", "discarded": False, "concurrency": c, "load": c,
                         "output_throughput_tok_s": tp, "e2e_ms_p99": p99, "slo_attainment": att,
                         "goodput_rps": att, "completed": 10})
    return pd.DataFrame(rows)


def test_verdict_never_ranks_hold_and_calls_out_the_tail():
    c = parse_campaign({**BASE, "arms": [{"name": n, "engine": {"kind": "llama_cpp"}} for n in ("fast-tail", "steady", "held")]})
    fair = analysis.fairness_table(c, arms_of(c, ("t", "t", "t")))
    lines = analysis.verdict(frame(), fair, Slo())
    assert lines[0] == "Not ranked (canaries HOLD): held."
    at4 = next(line for line in lines if line.startswith("At concurrency 4"))
    assert "highest output throughput fast-tail" in at4 and "lowest p99 E2E steady" in at4
    assert "2.40x the best" in at4 and "the tail decides" in at4
    assert "held" not in at4


def test_pareto_frontier_and_slo_capacity():
    f = analysis.pareto_frontier(frame())
    assert set(zip(f["arm"], f["load"])) == {("steady", 1), ("steady", 4), ("fast-tail", 4)}
    cap = analysis.slo_capacity(frame())
    assert cap.loc["fast-tail", "max load inside the SLO"] == 1
    assert cap.loc["steady", "max load inside the SLO"] == 4
