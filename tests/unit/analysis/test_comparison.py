"""Campaign analysis on hand-made inputs: fairness, verdicts, frontier, SLO capacity."""
import pandas as pd
from stackbook.analysis import comparison as analysis
from stackbook.config.loading import parse_campaign

BASE = {
    "name": "t",
    # a fixed count: one look, so every interval is at the rule's own 95%
    "protocol": {"workload": {"kind": "synthetic", "prompt_tokens": 64, "output_tokens": 16}, "repetitions": 3},
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
    assert list(f["comparable"]) == [False, False]  # two arms that disagree: neither is the reference
    assert f.loc["a", "differs"] == f.loc["b", "differs"] == "chat_template"


def test_a_declared_variable_keeps_the_arm_comparable():
    data = {**BASE, "variables_under_test": ["decoding.temperature"],
            "arms": [BASE["arms"][0], {**BASE["arms"][1], "protocol_overrides": {"decoding.temperature": 0.7}}]}
    c = parse_campaign(data)
    assert c.protocol_for(c.arms[1]).decoding.resolved()["temperature"] == 0.7
    f = analysis.fairness_table(c, arms_of(c))
    assert f["comparable"].all()


def frame(noise=(0.99, 1.0, 1.01)):
    """Three repetitions per point, each figure within 1% of its centre: run-to-run noise that the
    decision rule must see through."""
    rows = []
    for arm, label, pts in [("fast-tail", "accepted", [(1, 40, 1000, 1.0), (4, 120, 6000, 0.5)]),
                            ("steady", "accepted", [(1, 45, 900, 1.0), (4, 100, 2500, 1.0)]),
                            ("held", "HOLD", [(1, 500, 100, 1.0), (4, 900, 200, 1.0)])]:
        for c, tp, e2e, att in pts:
            for rep, k in enumerate(noise):
                rows.append({"arm": arm, "label": label, "point": f"c{c}-r{rep}", "repetition": rep, "discarded": False,
                             "concurrency": c, "load": c, "output_throughput_tok_s": tp * k, "e2e_ms_p50": e2e / k,
                             "ttft_ms_p50": e2e / 10 / k, "tpot_ms_p50": e2e / 50 / k, "e2e_ms_p99": e2e * 1.2 / k,
                             "slo_attainment": att, "goodput_rps": att, "completed": 10, "requests": 10,
                             "status": "accepted" if label == "accepted" else label})
    return pd.DataFrame(rows)


def protocol(**decision):
    return parse_campaign({**BASE, "protocol": {**BASE["protocol"], "decision": decision}} if decision
                          else BASE).protocol


def test_verdict_never_ranks_hold_and_decides_each_figure_with_its_interval():
    c = parse_campaign({**BASE, "arms": [{"name": n, "engine": {"kind": "llama_cpp"}}
                                         for n in ("fast-tail", "steady", "held")]})
    fair = analysis.fairness_table(c, arms_of(c, ("t", "t", "t")))
    lines, found = analysis.verdict(frame(), fair, c.protocol)
    assert lines[0] == "Not ranked (canaries HOLD): held."
    at4 = next(line for line in lines if line.startswith("At concurrency 4"))
    assert "fast-tail ahead of steady: output throughput 20% higher" in at4
    assert "steady ahead of fast-tail: E2E p50 58% lower" in at4
    assert "(3 and 3 repetitions, 30 and 30 requests, 95% intervals)" in at4
    assert "held" not in at4
    tp = next(d for d in found if d.load == 4 and d.metric == "output_throughput")
    assert (tp.decision == "ahead" and tp.leader == "fast-tail" and 1.05 < tp.lo < tp.ratio < tp.hi
            and abs(tp.ratio - 1.2) < 1e-9)
    assert not any(d.metric == "e2e_p99" for d in found)  # 10 requests per repetition cannot support a p99
    assert lines[-1].startswith("Not compared: E2E p99 (needs at least 100 requests per repetition)")


def test_a_gap_inside_the_margin_is_no_difference_and_one_repetition_decides_nothing():
    df = frame()
    df = df[df["arm"] != "held"]
    df.loc[df["arm"] == "steady", "output_throughput_tok_s"] = df.loc[df["arm"] == "fast-tail",
                                                                      "output_throughput_tok_s"].values * 1.01
    _, found = analysis.verdict(df, pd.DataFrame(), protocol())
    same = [d for d in found if d.metric == "output_throughput"]
    assert {d.decision for d in same} == {"no difference"}
    assert same[0].text.startswith("output throughput: no difference larger than 5% (interval -")
    _, once = analysis.verdict(df[df["repetition"] == 0], pd.DataFrame(), protocol())
    assert {d.decision for d in once} == {"undecided"}
    assert "one repetition per arm measures no run-to-run noise" in once[0].text


def test_pareto_frontier_and_slo_capacity_order_only_points_whose_intervals_part():
    table = analysis.load_table(frame(), 0.95)
    f = analysis.pareto_frontier(table)
    assert set(zip(f["arm"], f["load"])) == {("steady", 1), ("steady", 4), ("fast-tail", 4)}
    cap = analysis.slo_capacity(table, 0.99)
    assert cap.loc["fast-tail", "max load inside the SLO (estimate)"] == 1
    assert cap.loc["steady", "max load inside the SLO (estimate)"] == 4
    # 30 requests that all met the SLO cannot show 99% attainment: the interval reaches below it.
    assert pd.isna(cap.loc["steady", "max load inside the SLO (interval)"])
    assert analysis.slo_capacity(table, 0.8).loc["steady", "max load inside the SLO (interval)"] == 4
    # The exact claims bound the capacity and say what would decide the rest: 15 of 30 inside is
    # proven outside 99%; 30 of 30 is not proven inside it, and 299 of 299 would be.
    assert cap.loc["fast-tail", "lowest load proven outside (exact)"] == 4
    assert pd.isna(cap.loc["fast-tail", "highest load proven inside (exact)"])
    assert cap.loc["steady", "undecided, and what would decide it"] == (
        "1: 30 of 30 inside; 299 with no more outside would prove 99% (269 more); "
        "4: 30 of 30 inside; 299 with no more outside would prove 99% (269 more)")
    at_80 = analysis.slo_capacity(table, 0.8)
    assert at_80.loc["steady", "highest load proven inside (exact)"] == 4  # 0.8^30 = 0.1%: proven
    assert at_80.loc["steady", "undecided, and what would decide it"] == ""
    once = analysis.pareto_frontier(analysis.load_table(frame()[frame()["repetition"] == 0], 0.95))
    assert len(once) == 4  # one repetition: no intervals, nothing ordered


def test_two_arms_with_nothing_recorded_are_comparable():
    c = parse_campaign(BASE)
    arms = {arm.name: {"arm": arm, "engine": {}, "results": {}, "passport": {}} for arm in c.arms}
    f = analysis.fairness_table(c, arms)
    assert f["comparable"].all() and list(f["differs"]) == ["", ""]


def test_verdict_names_each_label_that_keeps_an_arm_out():
    df = frame()
    df.loc[df["arm"] == "steady", "label"] = "engine died"
    c = parse_campaign({**BASE, "arms": [{"name": n, "engine": {"kind": "llama_cpp"}}
                                         for n in ("fast-tail", "steady", "held")]})
    lines, _ = analysis.verdict(df, analysis.fairness_table(c, arms_of(c, ("t", "t", "t"))), c.protocol)
    assert lines[:3] == ["Not ranked (canaries HOLD): held.", "Not ranked (the engine died): steady.",
                         "Fewer than two accepted, comparable arms: no ranking."]


def test_write_analysis_beside_the_notebook(copy_committed_run):
    import json
    run = copy_committed_run("quickstart")
    result = analysis.write_analysis(run)
    on_disk = json.loads((run / "analysis.json").read_text())
    assert on_disk["campaign"] == "quickstart"
    assert {n: {k: a[k] for k in ("engine", "label", "comparable", "differs")} for n, a in on_disk["arms"].items()} == {
        "llama-cpp": {"engine": "llama_cpp", "label": "accepted", "comparable": True, "differs": []},
        "vllm-cpu": {"engine": "vllm_cpu", "label": "accepted", "comparable": True, "differs": []}}
    assert {(p["arm"], p["load"]) for p in on_disk["points"]} == {(a, c) for a in ("llama-cpp", "vllm-cpu")
                                                                  for c in (1, 2, 4)}
    assert on_disk["verdict"] == result.verdict and on_disk["verdict"][0].startswith("At concurrency 1, llama-cpp "
                                                                                     "against vllm-cpu")
    assert {d["decision"] for d in on_disk["decisions"]} <= {"undecided", "ahead", "no difference"}
    assert on_disk["discards"] == [] and {r["arm"] for r in on_disk["slo_capacity"]} == {"llama-cpp", "vllm-cpu"}


def test_the_analysis_labels_an_arm_whose_engine_died(copy_committed_run):
    import json
    run = copy_committed_run("quickstart")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["arms"]["vllm-cpu"]["status"] = "engine_died"
    (run / "manifest.json").write_text(json.dumps(manifest))
    result = analysis.write_analysis(run)
    assert result.arms["vllm-cpu"].label == "engine died"
    assert result.verdict[:2] == ["Not ranked (the engine died): vllm-cpu.",
                                  "Fewer than two accepted, comparable arms: no ranking."]


def test_a_sizing_only_run_is_not_measured(copy_committed_run):
    result = analysis.write_analysis(copy_committed_run("seed-qwen3.8-27b"))
    assert {a.label for a in result.arms.values()} == {"not measured"}
    assert all(a.comparable and not a.differs for a in result.arms.values())  # the reference arm too
    assert result.verdict == ["No arm produced measurements."] and result.points == []


def workloads_reference_arms():
    """The two arms of the committed workloads run (Poisson, 0.5/1/2 req/s) as recorded: vLLM-CPU's
    2 req/s point was discarded by the load rule (schedule lag p99 21.95 ms)."""
    def sweep(points, discards=()):
        return {"points": {f"rate{r:g}-r0": {"requests": 16, "completed": 16, "rate": r, "load": r,
                                             "output_throughput_tok_s": tp, "e2e_ms_p99": p99,
                                             "slo_attainment": att, "goodput_rps": gp, "discarded": r == 2
                                             and bool(discards)}
                           for r, tp, p99, att, gp in points},
                "discards": list(discards)}
    canaries = {"verdict": "PASS", "suite": "s", "suite_sha256": "0", "gating_checks": 8, "passed": 8, "failed": [],
                "counts": {}}
    return {
        "llama-cpp": {"results": {"canaries": canaries, "sweep": sweep([
            (0.5, 21.73, 4045.4, 0.9375, 0.510), (1, 31.20, 4363.8, 0.875, 0.964),
            (2, 43.47, 11635.6, 0.1875, 0.208)])}},
        "vllm-cpu": {"results": {"canaries": canaries, "sweep": sweep([
            (0.5, 21.59, 2484.4, 1.0, 0.541), (1, 30.50, 2660.5, 1.0, 1.077), (2, 78.69, 5714.7, 1.0, 2.059)],
            [{"point": "rate2-r0", "rule": "on_invalid_load", "detail": "schedule_lag_ms_p99=21.952"}])}}}


def test_a_discarded_point_is_shown_marked_but_never_ranked():
    df = analysis.comparison_frame(workloads_reference_arms())
    row = df[(df["arm"] == "vllm-cpu") & (df["load"] == 2)].iloc[0]
    assert row["status"] == "discarded (on_invalid_load: schedule_lag_ms_p99=21.952)"
    assert len(analysis.headline(df)) == 6  # still in the table
    table = analysis.load_table(df, 0.95)
    frontier = analysis.pareto_frontier(table)
    assert ("vllm-cpu", 2) not in set(zip(frontier["arm"], frontier["load"]))
    cap = analysis.slo_capacity(table, 0.99)
    assert cap.loc["vllm-cpu", "max load inside the SLO (estimate)"] == 1
    assert cap.loc["vllm-cpu", "points left out"].startswith("2 (discarded (on_invalid_load")
    assert pd.isna(cap.loc["llama-cpp", "max load inside the SLO (estimate)"])


def test_points_of_an_arm_on_hold_never_enter_the_frontier_or_the_capacity():
    table = analysis.load_table(frame(), 0.95)
    assert "held" not in set(analysis.pareto_frontier(table)["arm"])
    assert pd.isna(analysis.slo_capacity(table, 0.99).loc["held", "max load inside the SLO (estimate)"])


def test_the_pareto_figure_marks_the_discarded_point_with_its_rule_in_the_legend():
    from stackbook.analysis import plots
    fig = plots.pareto(analysis.comparison_frame(workloads_reference_arms()))
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "not ranked: discarded (on_invalid_load)" in legend  # the rule, its measured values in the tables
    assert not fig.axes[0].texts  # no reason written over the data


def test_the_verdict_does_not_compare_a_load_where_one_arm_is_left():
    lines, _ = analysis.verdict(analysis.comparison_frame(workloads_reference_arms()), pd.DataFrame(), protocol())
    assert lines[0] == "Discarded by preregistered rules (kept on disk, not ranked): vllm-cpu rate2-r0."
    assert lines[1] == ("At offered rate 2: only llama-cpp has a ranked point; not compared: vllm-cpu rate2-r0 "
                        "discarded (on_invalid_load: schedule_lag_ms_p99=21.952).")
    assert lines[2].startswith("At offered rate 0.5, llama-cpp against vllm-cpu (1 and 1 repetitions, 16 and 16 "
                               "requests, 95% intervals): output throughput: undecided")


def test_analysis_json_names_each_arms_ranked_and_left_out_points(tmp_path, monkeypatch):
    import json
    import yaml
    from stackbook.evidence.files import write_json_atomic
    from stackbook.evidence.rundir import RunDir
    run = RunDir(tmp_path / "workloads" / "r").create()
    c = parse_campaign({**BASE, "arms": [{"name": "llama-cpp", "engine": {"kind": "llama_cpp"}},
                                         {"name": "vllm-cpu", "engine": {"kind": "vllm_cpu"}}]})
    run.campaign_resolved.write_text(yaml.safe_dump(c.model_dump(mode="json")))
    for name, a in workloads_reference_arms().items():
        write_json_atomic(run.arm(name).create().results, a["results"])
    analysis.write_analysis(run)
    out = json.loads(run.analysis.read_text())
    assert out["arms"]["vllm-cpu"]["points_ranked"] == ["rate0.5-r0", "rate1-r0"]
    assert out["arms"]["vllm-cpu"]["points_left_out"] == {
        "rate2-r0": "discarded (on_invalid_load: schedule_lag_ms_p99=21.952)"}
    assert ("vllm-cpu", 2) not in {(p["arm"], p["load"]) for p in out["pareto_frontier"]}
    assert {r["arm"]: r["max load inside the SLO (estimate)"] for r in out["slo_capacity"]} == {
        "llama-cpp": None, "vllm-cpu": 1}
    assert out["discards"] == [{"arm": "vllm-cpu", "point": "rate2-r0", "rule": "on_invalid_load",
                                "detail": "schedule_lag_ms_p99=21.952"}]
    assert [p["status"] for p in out["points"] if p["arm"] == "vllm-cpu"] == [
        "accepted", "accepted", "discarded (on_invalid_load: schedule_lag_ms_p99=21.952)"]
    assert out["ranking_rule"].startswith("Only points of accepted, comparable arms")
    assert {f["arm"]: f["comparable"] for f in out["fairness"]} == {"llama-cpp": True, "vllm-cpu": True}


def test_an_over_saturated_load_is_outside_the_slo_whatever_its_share():
    """An open loop whose queue grew over the window (measure.steady_state) is outside in its own
    column, in words, and not counted inside by its estimate, its interval or its exact claim, even
    with every request inside the bounds; the exact columns stay binomial (30 of 30 refutes nothing)."""
    df = frame()
    df["queue_grew"] = (df["arm"] == "steady") & (df["load"] == 4)
    table = analysis.load_table(df, 0.95)
    cap = analysis.slo_capacity(table, 0.8)
    assert cap.loc["steady", "over-saturated (queue grew)"] == "4"
    assert cap.loc["steady", "outside by its growing queue (not binomial)"] == (
        "4: outside, its queue grew while it was measured (over-saturated); 30 of 30 requests met the SLO, "
        "the binomial claim alone would prove it inside")
    assert pd.isna(cap.loc["steady", "lowest load proven outside (exact)"])
    assert cap.loc["steady", "highest load proven inside (exact)"] == 1
    assert cap.loc["steady", "max load inside the SLO (estimate)"] == 1
    assert cap.loc["steady", "max load inside the SLO (interval)"] == 1
    assert cap.loc["fast-tail", "outside by its growing queue (not binomial)"] == ""
    # A run measured before the check has no such column, and its table is what it was.
    assert "over-saturated (queue grew)" not in analysis.slo_capacity(analysis.load_table(frame(), 0.95), 0.8)


def test_a_load_where_no_arm_is_left_says_so_in_plain_words():
    df = analysis.comparison_frame(workloads_reference_arms())
    rate2 = df["load"] == 2
    df.loc[rate2, "discarded"] = True  # both arms lost their point at rate 2
    lines, _ = analysis.verdict(df, pd.DataFrame(), protocol())
    [line] = [x for x in lines if x.startswith("At offered rate 2")]
    assert line.startswith("At offered rate 2: no arm has a ranked point; not compared: ")
