"""The answer block on committed runs' stored data: which arm and by how much, how sure (rounds,
degrees of freedom, what would decide the undecided, in rounds and minutes), inside which SLO
with one capacity per arm, the cost with its making, and the host with its ISA and kernels."""
import json
import re

import pytest
from stackbook.analysis import answer
from stackbook.analysis.answer_facts import other_runs, run_facts
from stackbook.analysis.decision import COMPARED_BY_NAME, decide
from stackbook.locations import OUTPUTS_DIR

RUNS = sorted(p.parent.relative_to(OUTPUTS_DIR).as_posix() for p in OUTPUTS_DIR.glob("*/*/analysis.json"))
# A run made in this checkout (`stackbook run` names it by its start): the sentences below name only
# the committed runs as the other runs of a campaign.
MADE_HERE = re.compile(r"\d{8}T\d{6}Z")


def facts(run: str):
    return run_facts(OUTPUTS_DIR / run)


def sentences(run: str) -> dict[str, str]:
    f = facts(run)
    return {s.question: s.text for s in answer.answer(f, committed(other_runs(OUTPUTS_DIR / run, run.split("/")[0])))}


def committed(runs: list) -> list:
    return [r for r in runs if not MADE_HERE.fullmatch(r.name.rpartition("/")[2])]


def test_the_capacity_run_names_each_loads_outcome_and_one_capacity_per_arm():
    said = sentences("capacity/reference")
    assert said["Which arm"] == (
        "On output throughput, the preregistered primary figure: run llama-cpp or vllm-cpu at concurrency 1 (between "
        "them undecided: +3% to +22%) and 2 (between them undecided: -18% to -3%).")
    # one capacity per arm: the search's, never the sweep's highest load beside it
    assert said["Inside which SLO"] == (
        "TTFT ≤ 1000 ms and TPOT ≤ 100 ms for at least 90% of requests: llama-cpp carries concurrency 1 and not 2 "
        "(the capacity search, 2 rounds); vllm-cpu carries concurrency 1 and not 2 (the capacity search, 2 rounds).")


def test_the_arm_that_carries_more_inside_the_slo_is_named_and_a_tie_is_not():
    rows = [{"arm": "llama-cpp", "lower": 2.0}, {"arm": "vllm-cpu", "lower": 4.0}]
    assert answer.capacity_leader({"capacity": rows}) == "; inside the SLO vllm-cpu carries the most load (4 against 2)"
    assert answer.capacity_leader({"capacity": [{"arm": "a", "lower": 1.0}, {"arm": "b", "lower": 1.0}]}) == ""
    assert answer.capacity_leader({"capacity": [{"arm": "a", "lower": 3.0}, {"arm": "b", "lower": None}]}) == ""


def test_cost_states_its_price_formula_utilisation_and_the_campaigns_caveat():
    said = sentences("capacity/reference")["At what cost"]
    assert said.startswith("Per million output tokens, llama-cpp $1.85 and vllm-cpu $2.11: $0.085 an hour ÷ "
                           "(the output tokens per second at each arm's proven capacity, 12.8 and 11.2 tok/s, × 3,600)")
    # the arithmetic the sentence states gives the figures it states
    rows = {r["arm"]: r for r in facts("capacity/reference").analysis["capacity"]}
    for arm, cost in (("llama-cpp", 1.85), ("vllm-cpu", 2.11)):
        assert round(0.085 / (rows[arm]["output_tok_s_at_lower"] * 3600) * 1e6, 2) == cost
    assert "(100% utilisation)" in said and "a managed endpoint charges $0.6 per million" in said
    assert said.endswith("illustrative round figures for a 2-vCPU cloud instance and a "
                         "small hosted model, not a quote).")
    assert sentences("quickstart/reference")["At what cost"].startswith("No prices set in the campaign")


def test_how_sure_gives_rounds_their_minutes_and_the_rounds_that_would_decide_the_undecided():
    said = sentences("capacity/reference")["How sure"]
    # rounds from the manifest's round log: 684 s and 468 s
    assert said.startswith("2 rounds of every arm (each took 11.4 and 7.8 min; stopped after 2 repetitions: fixed by "
                           "the protocol (min = max)); the output throughput decisions rest on 2 degrees of freedom "
                           "(95% intervals); 5 of 8 comparisons undecided")
    # one more round costs the later round's 7.8 min
    assert ("output throughput at concurrency 1, output throughput at concurrency 2 and E2E p50 at concurrency 1: "
            "about 1 more round, about 8 min") in said
    # the decision's own words, built by the rule from the same interval, name the same count
    d = next(d for d in facts("capacity/reference").analysis["decisions"]
             if d["metric"] == "output_throughput" and d["load"] == 1)
    worded = decide(1, COMPARED_BY_NAME["output_throughput"], d["arm_a"], d["arm_b"], (d["ratio"], d["lo"], d["hi"]),
                    (2, 2), (78, 78), 0.05, 0.95, d["method"], d["degrees_of_freedom"], 2 * d["pooled_loads"])
    assert "about 1 more round would decide it at this estimate" in worded.text


def test_a_decision_on_one_degree_of_freedom_says_it_is_weak():
    said = sentences("agent-log/reference")
    assert said["Which arm"].endswith("run llama-cpp at trace speed 1 (250% higher than vllm-cpu, 160% to 370%; on one "
                                      "degree of freedom: weak).")
    assert "rest on 1 degree of freedom" in said["How sure"]
    assert "3 of 3 decisions rest on fewer than two degrees of freedom: weak" in said["How sure"]
    assert "E2E p50 at trace speed 1: about 1 more round, about 2 min" in said["How sure"]


def test_four_arms_name_the_one_no_other_beats_and_its_nearest_rival():
    said = sentences("four-engines/reference")
    assert said["Which arm"] == (
        "On output throughput, the preregistered primary figure: run llama-cpp at concurrency 1 (145% higher than "
        "transformers, the next best, 74% to 246%) and 2 (128% higher than transformers, the next best, 63% to 219%).")
    assert said["On which host"] == ("AMD EPYC, 2 CPUs, AVX2 only (no AVX-512), bf16 weights; llama-cpp ran ggml CPU "
                                     "with AVX2; "
                                     "vllm-cpu ran vllm._C_AVX2; kernels not recorded for mlx, transformers. "
                                     "No other run of this campaign under outputs/.")


def test_arms_no_one_beats_are_named_together_with_what_lies_between_them():
    said = sentences("known-effect/reference")
    assert said["Which arm"] == ("On TPOT p50, the preregistered primary figure: run fast "
                                 "or fast-again at offered rate "
                                 "0.4 req/s (between them undecided: -6% to +15%) and 0.8 (between them undecided: "
                                 "-26% to +39%). The seeded schedules sent 0.4 as 0.351, 0.8 as 0.703 req/s.")
    assert "the stopping rule watched TPOT p50 only" in said["How sure"] and "97.5% intervals" in said["How sure"]
    assert "5 more in the decision table" in said["How sure"]
    assert "first or second at concurrency 1 (between them no difference beyond the margin: -7% to +6%)" in \
        sentences("aa-control/reference")["Which arm"]


def test_a_run_of_one_round_decides_nothing_and_names_the_other_host_with_its_verdict():
    said = sentences("quickstart/avx2-host")
    assert said["Which arm"] == ("On output throughput, the preregistered primary figure: run llama-cpp or vllm-cpu at "
                                 "concurrency 1 and 2 (between them undecided: no interval, one repetition per arm "
                                 "measures no run-to-run spread).")
    assert said["How sure"].startswith("1 round of every arm (a round's duration is not recorded in the manifest)")
    assert said["Inside which SLO"].startswith(
        "TTFT ≤ 1500 ms and TPOT ≤ 100 ms for at least 99% of requests: llama-cpp: no load proven inside (the sweep "
        "tested up to 8); proven outside from 2; undecided at 1 (12 of 12 inside; 299 "
        "with none outside would prove 99%)")
    assert said["On which host"] == (
        "AMD EPYC, 2 CPUs, instruction sets not recorded in its passports, bf16 weights; kernels not recorded for "
        "llama-cpp, vllm-cpu. Other runs of this campaign: quickstart/avx2-fp32 on AMD EPYC, 2 CPUs, AVX2 only (no "
        "AVX-512), fp32 weights: llama-cpp or vllm-cpu at concurrency 1 (between them undecided: -2% to +11%); "
        "vllm-cpu at concurrency 2 (25% higher than llama-cpp, 18% to 34%) and 4 (27% higher than llama-cpp, 20% to "
        "36%) | "
        "quickstart/reference on AMD EPYC, 2 CPUs, AVX-512 BF16, bf16 weights: llama-cpp at "
        "concurrency 1 (43% higher than vllm-cpu, 31% to 56%); llama-cpp or vllm-cpu at concurrency 2 (between them "
        "undecided: -11% to +5%); vllm-cpu at concurrency 4 (41% higher than llama-cpp, 29% to 54%).")


def test_the_sweeps_capacity_is_at_least_the_highest_load_proven_inside_and_says_how_far_it_tested():
    row = {"arm": "a", "label": "accepted", "highest load proven inside (exact)": 2,
           "lowest load proven outside (exact)": 8, "highest load tested": 8}
    assert answer.swept_capacity(row, "concurrency") == (
        "a carries at least concurrency 2, the highest load proven inside (the sweep tested up to 8, outside at 8)")
    undecided = dict(row, **{"highest load proven inside (exact)": None, "lowest load proven outside (exact)": None,
                             "undecided, and what would decide it": "1: 64 of 64 inside; 299 with no more outside "
                             "would prove 99% (235 more); 2: 63 of 64 inside; 628 with no more outside would prove "
                             "99% (564 more)"})
    assert answer.swept_capacity(undecided, "concurrency") == (
        "a: no load proven inside or outside (the sweep tested up to 8; undecided at 1, 2 (64 of 64 inside; 299 with "
        "none outside would prove 99%))")


@pytest.mark.parametrize("run", RUNS)
def test_every_committed_run_states_one_capacity_per_arm(run):
    """Each arm opens exactly one clause of the SLO sentence, whether the search or the sweep gave it."""
    said = sentences(run)["Inside which SLO"]
    clauses = said.split(": ", 1)[1].rstrip(".").split("; ") if ": " in said else []
    analysis = json.loads((OUTPUTS_DIR / run / "analysis.json").read_text())
    arms = [r["arm"] for r in analysis.get("slo_capacity") or []]
    heads = [c for c in clauses if any(c.startswith(f"{a}: ") or c.startswith(f"{a} carries") for a in arms)]
    assert sorted(h.split(":")[0].split(" carries")[0] for h in heads) == sorted(arms)


def test_rounds_take_their_minutes_from_the_round_log_and_one_more_costs_a_later_round():
    manifest = {"repetitions": {"rounds": [{"started_unix": 0, "finished_unix": 600},
                                           {"started_unix": 600, "finished_unix": 840},
                                           {"started_unix": 840, "finished_unix": 1200}]}}
    assert answer.round_minutes(manifest) == [10.0, 4.0, 6.0]
    assert answer.minutes_per_extra_round([10.0, 4.0, 6.0]) == 5.0 and answer.minutes_per_extra_round([10.0]) == 10.0
    assert answer.round_minutes({}) == [] and answer.minutes_per_extra_round([]) is None


def test_the_slo_bounds_and_a_campaign_without_an_attainment_read_the_protocols_default():
    assert answer.slo_words({"ttft_ms": 1000.0, "tpot_ms": 100.0, "e2e_ms": None, "attainment": 0.9}) == \
        "TTFT ≤ 1000 ms and TPOT ≤ 100 ms for at least 90% of requests"
    assert answer.slo_words({"ttft_ms": 1500.0, "e2e_ms": 3000.0}) == \
        "TTFT ≤ 1500 ms and E2E ≤ 3000 ms for at least 99% of requests"
    assert answer.slo_words(None) == "no SLO set in the campaign"


def test_other_runs_leave_out_the_run_itself_and_a_copy_of_it(tmp_path):
    from tests.support.runs import copy_committed_run_to

    assert [o.name for o in committed(other_runs(OUTPUTS_DIR / "quickstart/avx2-host", "quickstart"))] == [
        "quickstart/avx2-fp32", "quickstart/reference"]
    copy = copy_committed_run_to(tmp_path / "quickstart" / "reference", "quickstart", ignore=("*.ipynb", "arms"))
    assert [o.name for o in committed(other_runs(copy, "quickstart"))] == ["quickstart/avx2-fp32",
                                                                          "quickstart/avx2-host"]


def test_a_rate_whose_seeded_schedules_strayed_reads_at_what_they_sent():
    points = [{"rate": 0.4, "scheduled_rate_rps": 0.3516}, {"rate": 0.4, "scheduled_rate_rps": 0.3516},
              {"rate": 0.8, "scheduled_rate_rps": 0.7029}, {"rate": 0.8, "scheduled_rate_rps": 0.77},
              {"rate": 2.0, "scheduled_rate_rps": 1.9}]  # 5% off: within the stray, not named
    said = answer.offered_note({"points": points})
    assert said == " The seeded schedules sent 0.4 as 0.352, 0.8 as 0.703 to 0.77 req/s."
    assert answer.offered_note({"points": [{"concurrency": 2, "load": 2}]}) == ""


def test_the_known_effect_run_names_the_rates_its_schedules_sent():
    assert sentences("known-effect/reference")["Which arm"].endswith(
        " The seeded schedules sent 0.4 as 0.351, 0.8 as 0.703 req/s.")


def test_a_routing_run_answers_which_policy_where_and_where_affinity_is_a_hotspot():
    said = sentences("routing/reference")
    assert list(said)[:2] == ["Which arm", "Which routing policy"]
    assert said["Which routing policy"] == (
        "two-cache-aware against two-round-robin on output throughput: at 2 two-cache-aware ahead of two-round-robin: "
        "output throughput 13% higher (8% to 19%); at 4 two-cache-aware ahead of two-round-robin: output throughput "
        "23% higher (17% to 29%). Its TTFT p90 stays lower than two-round-robin's up to load 4, the heaviest swept; "
        "a hotspot at load 2 (1.32), the busiest replica at least 1.25x the mean in every repetition, not at 4 (1.10).")
    assert "Which routing policy" not in sentences("capacity/reference")
