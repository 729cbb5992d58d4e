"""The loop on the simulated knee: it reaches the known best setting, checks the A/A knob first,
writes each step as it ends and resumes an interrupted record without measuring again; the
knobs and the campaign refuse bad input by name."""
import json

import pytest
from pydantic import ValidationError

from stackbook.config.errors import CampaignError
from stackbook.engines.llama_cpp import LlamaCppAdapter
from stackbook.engines.vllm_cpu import VllmCpuAdapter
from stackbook.search import knee
from stackbook.search.campaign import load_search_campaign
from stackbook.engines.knobs import Knob
from stackbook.search.loop import Plan, run_search
from stackbook.search.record import read
from stackbook.search.report import report_text

# 16 clients, a 25 ms TPOT bound: t0 + t1*b within it at b = 8 for "10,1.5" (22 ms, the grid's
# fastest step there) and for nothing at b = 16, so the best is B = 8 on "10,1.5": 8 x 16 tokens
# per (16 x 22 ms), 364 tok/s.
LOAD = knee.KneeLoad(concurrency=16, output_tokens=16, output_jitter=0.5, ttft_ms=3000, tpot_ms=25, requests=200)
BEST = {"max_batch": 8, "step_costs": "10,1.5", "label": "a"}


def _counting():
    calls = []

    def measure(config, seed):
        calls.append((dict(config), seed))
        return knee.simulated_point(config, LOAD, seed)
    return measure, calls


def test_the_model_is_the_closed_form_below_the_knee():
    cfg = {"max_batch": 16, "step_costs": "10,1.5", "label": "a"}
    loose = LOAD.model_copy(update={"tpot_ms": 100})
    assert knee.predict(cfg, loose) == pytest.approx(16 / 0.034)  # 16 tokens a step of 10 + 1.5 x 16 ms
    assert knee.predict(cfg, LOAD) == 0.0                           # that step is over the 25 ms bound
    assert knee.predict(BEST, LOAD) == pytest.approx(8 / 0.022 * 16 / 16, rel=1e-6)


def test_the_loop_reaches_the_known_best_and_resumes_without_measuring_again(tmp_path):
    path = tmp_path / "search.jsonl"
    measure, calls = _counting()
    plan = Plan(knobs=knee.KNOBS, incumbent={"max_batch": 4, "step_costs": "20,0.5", "label": "a"}, max_steps=6)
    steps = run_search(measure, lambda c: knee.predict(c, LOAD), plan, path, seed=3)
    assert [s.kind for s in steps][:2] == ["baseline", "control"] and steps[-1].kind == "stop"
    assert not steps[1].accepted and steps[1].incumbent_after == plan.incumbent
    assert steps[-1].incumbent_after == BEST
    for s in steps:
        if s.kind == "candidate" and s.accepted:
            assert s.judgement.lo is None or s.judgement.lo > 1 + plan.margin
    assert len(path.read_text().splitlines()) == len(steps) and read(path) == steps

    # Interrupted after the control step (its last line cut short): the rest is measured, the start is not.
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:2]) + "\n" + lines[2][:40])
    measure2, calls2 = _counting()
    again = run_search(measure2, lambda c: knee.predict(c, LOAD), plan, path, seed=3)
    assert [s.model_dump() for s in again] == [s.model_dump() for s in steps]
    assert len(calls2) == len(calls) - (plan.rounds + 2 * len(steps[1].incumbent_rounds))
    # A finished record is read back, nothing measured.
    measure3, calls3 = _counting()
    assert run_search(measure3, lambda c: knee.predict(c, LOAD), plan, path, seed=3) == again and calls3 == []

    text = report_text("t", steps, knee.KNOBS, plan.incumbent)
    assert "max_batch=8, step_costs=10,1.5, label=a" in text
    assert "A/A checks accepted (must be none): 0" in text
    assert "max_batch=32 (orchestration): not measured" in text


def test_knobs_are_declared_on_each_kind_and_checked():
    assert {k.name for k in LlamaCppAdapter.search_knobs} >= {"engine.threads", "engine.parallel", "--batch-size",
                                                             "--ubatch-size", "--flash-attn",
                                                             "protocol.precision.kv_cache"}
    assert {k.name for k in VllmCpuAdapter.search_knobs} >= {"engine.max_num_seqs", "--max-num-batched-tokens",
                                                            "--enable-chunked-prefill", "engine.kv_cache_gib"}
    assert all(any(k.control for k in kind.search_knobs) for kind in (LlamaCppAdapter, VllmCpuAdapter))
    with pytest.raises(ValidationError, match="default 3 is not among its values"):
        Knob(name="x", layer="kernels", values=(1, 2), default=3)
    with pytest.raises(ValidationError, match="layer"):
        Knob(name="x", layer="network", values=(1, 2), default=1)


CAMPAIGN = """
name: t
system: {kind: knee, concurrency: 2, output_tokens: 4, tpot_ms: 40, requests: 6}
search: {budget: {steps: 1}, knobs: [max_batch], rounds: 2, max_rounds: 2}
"""


@pytest.mark.parametrize("change, message", [
    (("knobs: [max_batch]", "knobs: [max_bach]"), "no knob 'max_bach' on kind knee; its knobs are max_batch"),
    (("rounds: 2, max_rounds: 2", "rounds: 3, max_rounds: 2"), "max_rounds 2 is under rounds 3"),
    (("rounds: 2,", "rounds: 2, incumbent: {max_batch: 5},"), "search.incumbent.max_batch: 5 is not among"),
    (("kind: knee", "kind: kne"), "kind"),
    (("steps: 1", "steps: -1"), "steps"),
])
def test_a_bad_search_section_is_refused_by_name(tmp_path, change, message):
    p = tmp_path / "c.yaml"
    p.write_text(CAMPAIGN.replace(*change))
    with pytest.raises(CampaignError, match=message.replace("(", r"\(").replace("[", r"\[")):
        load_search_campaign(p)


def test_a_good_search_campaign_loads_with_the_kinds_defaults(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(CAMPAIGN)
    c = load_search_campaign(p)
    assert [k.name for k in c.knobs()] == ["max_batch"] and c.incumbent() == {"max_batch": 4, "step_costs": "20,0.5",
                                                                            "label": "a"}
    p.write_text(json.dumps({"name": "x"}))
    with pytest.raises(CampaignError, match="search: section"):
        load_search_campaign(p)
