"""Client against engine, with a verdict: the committed quickstart reference's vLLM-CPU points
(their records and the engine's histogram increases, copied from the run)."""
import json
from pathlib import Path

import pytest
from stackbook.engines import adapter_class
from stackbook.engines.facts import MetricSeries
from stackbook.loadgen.records import read_records
from stackbook.measure.reconciliation import arm_reconciliation, reconcile_with_engine, reconciliation_verdict

DATA = Path(__file__).parents[1] / "data"
RECORDS = read_records(DATA / "quickstart-reference-vllm-cpu-c1-c2.jsonl")
HISTOGRAMS = json.loads((DATA / "quickstart-reference-vllm-cpu-c1-c2-histograms.json").read_text())
VLLM = adapter_class("vllm_cpu").metric_series


def reconcile(point: str) -> dict:
    return reconcile_with_engine(HISTOGRAMS[point], [r for r in RECORDS if r.point == point], VLLM)


def test_a_front_end_offset_beyond_the_tolerance_fails_with_its_cause():
    """c=1: the client's TTFT is 1.123x the engine's (12.4 ms of HTTP, template and tokenization
    before the engine's clock starts), TPOT within 2.5%: FAIL on TTFT, the cause named."""
    r = reconcile("c1-r0")
    assert (r["requests_client"], r["requests_engine"]) == (10, 10)   # every request of the point, both sides
    assert r["ttft_ratio_client_over_engine"] == pytest.approx(1.1232, abs=1e-4)
    assert (r["verdict"], r["ttft_verdict"], r["tpot_verdict"]) == ("FAIL", "FAIL", "PASS")
    assert r["likely_cause"].startswith("the client's TTFT is +12.4 ms from the engine's: time before the engine's "
                                        "clock starts")


def test_means_within_the_tolerance_pass():
    r = reconcile("c2-r0")
    assert r["ttft_ratio_client_over_engine"] == pytest.approx(1.0348, abs=1e-4)
    assert (r["verdict"], r["likely_cause"], r["tolerance"]) == ("PASS", None, 0.05)


def test_counting_other_requests_than_the_client_is_not_like_with_like():
    """The measured requests alone against a histogram that counted the whole point: FAIL, said so."""
    measured = [r for r in RECORDS if r.point == "c2-r0" and r.phase == "measure"]
    r = reconcile_with_engine(HISTOGRAMS["c2-r0"], measured, VLLM)
    assert r["verdict"] == "FAIL" and r["likely_cause"].startswith(
        "not like with like: the engine's histograms counted 11 requests, the client 8")


def test_an_engine_without_histograms_is_not_available():
    r = reconcile_with_engine({}, RECORDS, VLLM)
    assert (r["verdict"], r["engine_histograms"]) == ("not available", "not exported by this engine")
    arm = arm_reconciliation({"c1-r0": {"engine_reconciliation": r}})
    assert arm["verdict"] == "not available"


def test_an_arm_fails_when_any_point_fails_and_old_runs_get_verdicts():
    old = {name: {"engine_reconciliation": {k: v for k, v in reconcile(name).items()
                                            if "verdict" not in k and k not in ("tolerance", "likely_cause")}}
           for name in ("c1-r0", "c2-r0")}
    arm = arm_reconciliation(old)
    assert arm["verdict"] == "FAIL"
    assert {n: p["verdict"] for n, p in arm["points"].items()} == {"c1-r0": "FAIL", "c2-r0": "PASS"}
    assert reconciliation_verdict(old["c2-r0"]["engine_reconciliation"], tolerance=0.03)["verdict"] == "FAIL"


def test_the_passport_and_the_analysis_carry_the_verdicts(copy_committed_run):
    """Over the committed quickstart reference (copied): vLLM-CPU PASS at every point of both
    repetitions (client within 5% of its histograms), llama.cpp not available (it exports none)."""
    from stackbook.analysis.comparison import analyse_run, load_run
    from stackbook.run_checks.passport import build_passport
    run = copy_committed_run("quickstart", to="run")
    rows = {(r["arm"], r["point"]): r["verdict"] for r in analyse_run(run).reconciliation}
    assert {v for (arm, _), v in rows.items() if arm == "vllm-cpu"} == {"PASS"}
    assert {p for (arm, p) in rows if arm == "vllm-cpu"} == {f"c{c}-r{r}" for c in (1, 2, 4) for r in (0, 1)}
    assert rows[("llama-cpp", "c1-r0")] == "not available"
    campaign, arms = load_run(run)
    passport = build_passport(campaign, arms["vllm-cpu"]["arm"], arms["vllm-cpu"]["dir"])
    assert passport.validity.reconciliation["verdict"] == "PASS"


def test_two_kinds_naming_different_histograms_are_each_reconciled_against_their_own():
    """One run, two arms: vLLM's histograms, and a kind whose engine names its own (here the same
    increases under another prefix). Each arm is read by its own kind's names, so neither borrows
    the other's, and a kind that names none reads "not available"."""
    other = MetricSeries(latency_histograms={"ttft": "other:first_token_seconds", "itl": "other:token_gap_seconds"})
    renamed = {k.replace("vllm:time_to_first_token_seconds", "other:first_token_seconds")
                .replace("vllm:inter_token_latency_seconds", "other:token_gap_seconds"): v
               for k, v in HISTOGRAMS["c2-r0"].items()}
    records = [r for r in RECORDS if r.point == "c2-r0"]
    mine = reconcile_with_engine(HISTOGRAMS["c2-r0"], records, VLLM)
    theirs = reconcile_with_engine(renamed, records, other)
    assert mine["ttft_ms_engine_mean"] == theirs["ttft_ms_engine_mean"] is not None
    assert mine["verdict"] == theirs["verdict"] == "PASS"
    assert reconcile_with_engine(renamed, records, VLLM)["verdict"] == "not available"
    assert reconcile_with_engine(HISTOGRAMS["c2-r0"], records, other)["verdict"] == "not available"
    assert reconcile_with_engine(HISTOGRAMS["c2-r0"], records, MetricSeries())["verdict"] == "not available"


AGENT_LOG = Path(__file__).parents[3] / "outputs" / "agent-log" / "reference" / "arms" / "vllm-cpu"


def test_replies_of_mixed_lengths_are_compared_gap_for_gap():
    """The committed agent-log run: replies of 13 to 32 tokens. The engine's ITL histogram counts
    every gap once; the per-request TPOT mean counts every reply once, and drifted 3.9% from it (the
    workload's shape, not a clock's fault). Averaged gap for gap, the client meets the engine."""
    sweep = json.loads((AGENT_LOG / "results.json").read_text())["sweep"]
    records = [r for r in read_records(AGENT_LOG / "requests.jsonl") if r.point == "trace-r0"]
    assert len({r.output_tokens_server for r in records}) > 5
    r = reconcile_with_engine(sweep["telemetry"]["trace-r0"], records, VLLM)
    assert r["tpot_ratio_client_over_engine_itl"] == sweep["points"]["trace-r0"]["engine_reconciliation"][
        "tpot_ratio_client_over_engine_itl"] == pytest.approx(1.0392, abs=1e-4)
    assert r["itl_ratio_client_over_engine"] == pytest.approx(1.0, abs=0.002)
    gaps = sum(x.output_tokens_server - 1 for x in records)
    assert r["itl_ms_client_mean"] == pytest.approx(
        sum(1000 * (x.end_s - x.first_token_s) for x in records) / gaps, rel=1e-4)
    assert (r["verdict"], r["decode_compared"]) == ("PASS", "gap-weighted inter-token latency")
    # at a 3% tolerance the per-request mean would have failed this run; the gap-weighted one holds
    assert reconciliation_verdict(r, tolerance=0.03)["verdict"] == "PASS"
    old = {k: v for k, v in r.items() if not k.startswith("itl_") or k == "itl_ms_engine_mean"}
    judged = reconciliation_verdict(old, tolerance=0.03)
    assert judged["decode_compared"].startswith("per-request TPOT")
    assert judged["verdict"] == "FAIL" and "per-request TPOT" in judged["likely_cause"]


def test_the_arm_states_the_rule_its_points_were_judged_by():
    """A run recorded before the gap-weighted mean keeps the rule it was judged by (and audits as
    it was committed); a run with it says the TPOT mean was taken per gap."""
    sweep = json.loads((AGENT_LOG / "results.json").read_text())["sweep"]
    recorded = arm_reconciliation(sweep["points"])
    assert recorded["rule"] == ("client TTFT and TPOT means within 5% of the engine's histogram means over the "
                                "same requests")
    assert "itl_ratio" not in recorded["points"]["trace-r0"]
    records = [r for r in read_records(AGENT_LOG / "requests.jsonl") if r.point == "trace-r0"]
    now = arm_reconciliation({"trace-r0": {"engine_reconciliation": reconcile_with_engine(
        sweep["telemetry"]["trace-r0"], records, VLLM)}})
    assert now["rule"].endswith(", the TPOT mean taken per gap between tokens as the engine's ITL histogram takes it")
    assert now["points"]["trace-r0"]["itl_ratio"] == pytest.approx(1.0, abs=0.002)


def test_a_decode_gap_beyond_the_tolerance_fails_naming_what_was_compared():
    r = reconcile("c2-r0") | {"itl_ratio_client_over_engine": 0.87}
    v = reconciliation_verdict(r)
    assert (v["verdict"], v["tpot_verdict"]) == ("FAIL", "FAIL")
    assert v["likely_cause"].startswith("the client's gap-weighted inter-token latency is 0.870x the engine's")
