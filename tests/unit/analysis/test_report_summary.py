"""The report's first screen and page structure: the decision table (or the verdict lines per
load), sections with nothing to show folded to one line, the timeline data, and the engine's
samples kept per time."""
import json
import os
import time

import nbformat
from stackbook.analysis import summary, timelines
from stackbook.loadgen.records import read_records
from stackbook.measure.telemetry import RssSampler, group_usage
from stackbook.report_page import Absent, contents, fold_empty_sections

QUICKSTART = "outputs/quickstart/reference/arms/llama-cpp/requests.jsonl"


def test_verdict_lines_read_one_row_per_load():
    frame = summary.verdict_frame(["Discarded by rules: x.", "At concurrency 4: highest throughput b (67.6 tok/s)."])
    assert frame.to_dict("records") == [{"load": "all loads", "verdict": "Discarded by rules: x."},
                                        {"load": "concurrency 4", "verdict": "highest throughput b (67.6 tok/s)."}]


def test_decision_rows_show_what_the_rule_says_with_ratio_interval_and_evidence():
    text = "vllm-cpu ahead of llama-cpp: output throughput 167% higher (141% to 195%)."
    row = {"load": 4, "metric": "output_throughput", "arm_a": "vllm-cpu", "arm_b": "llama-cpp",
           "leader": "vllm-cpu", "decision": "ahead", "ratio": 2.6712, "lo": 2.41, "hi": 2.953, "confidence": 0.95,
           "repetitions_a": 3, "repetitions_b": 3, "requests_a": 24, "requests_b": 24, "text": text}
    out = summary.decision_frame([row]).iloc[0]
    assert out["ratio a/b [95% interval]"] == "2.67 [2.41, 2.95]" and out["figure"] == "output throughput"
    assert out["what the rule says"] == text and out["repetitions, requests"] == "3+3 reps, 24+24 req"
    undecided = dict(row, decision="undecided", text="TTFT p50: undecided with this sample (...): add repetitions.",
                     metric="ttft_p50")
    assert summary.decision_frame([undecided]).iloc[0]["what the rule says"].startswith("undecided with this sample")
    html = summary._html_table(summary.decision_frame([row]), summary.DECISION_TABLE_ID, hover="text")
    assert 'id="decision-table"' in html and f'title="{text}"' in html and ">text<" not in html


def _section_notebook(outputs):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Title"), nbformat.v4.new_markdown_cell("## Kept\n\nprose"),
                nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output("stream", name="stdout", text="1\n")]),
                nbformat.v4.new_markdown_cell("## Empty\n\nlong prose"),
                nbformat.v4.new_code_cell("y", outputs=outputs),
                nbformat.v4.new_markdown_cell("## Prose only\n\nno code")]
    return nb


def test_a_section_with_nothing_to_show_is_folded_to_one_line_with_its_reason():
    absent = nbformat.v4.new_output("display_data", data={"text/markdown": "*No open-loop point.*"},
                                    metadata={"text/markdown": {"stackbook_absent": True}})
    nb = _section_notebook([absent])
    assert fold_empty_sections(nb) == ["Empty"]
    assert "<b>Empty</b>: left out: No open-loop point." in nb.cells[3].source and len(nb.cells) == 5
    assert 'href="#Kept"' in contents(nb) and "Empty" not in contents(nb) and 'href="#Prose-only"' in contents(nb)
    nb = _section_notebook([])
    assert fold_empty_sections(nb) == ["Empty"] and "nothing to show for this run" in nb.cells[3].source
    assert Absent("why")._repr_markdown_() == ("*why*", {"stackbook_absent": True})


def test_the_timeline_has_one_row_per_request_from_the_first_send():
    records = read_records(QUICKSTART)
    frame = timelines.request_timeline(records)
    assert len(frame) == len(records) and frame["sent"].iloc[0] == 0
    assert (frame["first_token"] >= frame["sent"]).all() and (frame["end"] >= frame["first_token"]).all()
    assert set(frame["phase"]) >= {"warmup", "measure"}
    rate = timelines.throughput_over_time(records)
    # every chunk counted once: the bins add up to the tokens streamed
    assert round((rate["tokens_per_s"] * 1.0).sum()) == sum(sum(r.chunk_tokens) for r in records)


def test_engine_samples_are_kept_per_time_with_rss_and_cpu(tmp_path):
    usage = group_usage(os.getpid())
    assert usage["rss_bytes"] > 10 * 2**20 and usage["cpu_s"] > 0
    keep = tmp_path / "engine_samples.jsonl"
    with RssSampler(os.getpid(), interval_s=0.1, keep=keep) as rss:
        deadline = time.monotonic() + 60  # the sampling process needs its imports first (seconds on a busy host)
        while len(rss.samples) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
            rss.collect()
        peak = rss.peak_bytes
    lines = [json.loads(line) for line in keep.read_text().splitlines()]
    assert len(lines) >= 3 and peak == max(v["rss_bytes"] for _, v in lines)
    frame = timelines.read_engine_samples(keep)
    assert frame["t"].iloc[0] == 0 and (frame["rss_gib"] > 0).all() and frame["cpu_cores"].dropna().ge(0).all()


def test_the_first_screen_of_the_quickstart_reference_names_the_question_and_each_arm():
    from stackbook.analysis import comparison
    from stackbook.evidence.rundir import RunDir

    run = RunDir("outputs/quickstart/reference")
    campaign, arms = comparison.load_run(run)
    result = comparison.analyse_run(run)
    page = summary.summary_html(run, campaign, arms, result)
    assert "Which stack serves <b>smollm2-135m-instruct</b> best on <b>AMD EPYC, 2 CPUs</b> " \
           "under a closed loop of 1, 2, 4 concurrent clients, 32 measured requests per point?" in page
    # the decisions the committed run's rule reached, each with its ratio and interval
    assert "no decision rows" not in page and "llama-cpp ahead of vllm-cpu: output throughput" in page
    assert "vllm-cpu ahead of llama-cpp: output throughput" in page and "2+2 reps, 64+64 req" in page
    assert '<a href="arms/vllm-cpu/30_load_sweep.html">sweep</a>' in page
    assert '<a href="50_demand_map.html">the measured demand map</a>' in page
    decided = result.model_copy(update={"decisions": [
        {"load": "concurrency 4", "metric": "output throughput", "arm_a": "vllm-cpu", "arm_b": "llama-cpp",
         "leader": "vllm-cpu", "decision": "ahead", "ratio": 2.67, "lo": 2.4, "hi": 2.9, "confidence": 0.95,
         "repetitions_a": 1, "repetitions_b": 1, "requests_a": 8, "requests_b": 8, "text": "vllm-cpu leads."}]})
    page = summary.summary_html(run, campaign, arms, decided)
    assert "2.67 [2.40, 2.90]" in page and "decision rule" in page and "no decision rows" not in page


def test_the_question_of_a_trace_replay_counts_its_own_requests_and_says_how_it_was_paced():
    """A trace measures its own rows, not requests_per_point (16 by default): the question says 12
    for the agent log, and that its sessions were replayed as closed loops."""
    from stackbook.config.loading import load_campaign

    campaign = load_campaign("campaigns/agent-log.yaml")
    q = summary.question(campaign, {})
    assert q.endswith("under a replayed openai trace (12 requests in 4 sessions, each session a closed loop, every "
                      "step after the reply before it), 12 measured requests per point?")


def test_every_report_links_the_notebooks_that_teach_its_method_and_the_path_to_the_seeds_method(tmp_path):
    from stackbook.evidence.rundir import RunDir
    from stackbook.locations import REPO_ROOT

    from tests.support.runs import copy_committed_run_to

    committed = RunDir(REPO_ROOT / "outputs/quickstart/reference")
    links = {what: (where, linked) for what, where, linked in summary.method_links(committed)}
    path = "from this report to the seed's method, step by step"
    assert list(links) == [*summary.METHOD_PAGES.values(), path]
    assert links[summary.METHOD_PAGES["50_demand_map"]] == ("50_demand_map.html", True)  # the run's own page
    assert links[summary.METHOD_PAGES["10_sizing"]] == ("arms/llama-cpp/10_sizing.html", True)
    assert links[summary.METHOD_PAGES["00_decide"]] == (
        "../../../notebooks/00_decide.py",
        True,
    )  # the workbook's source
    assert links[path] == ("../../../docs/method-path.md", True)
    for where, _ in links.values():
        assert (committed.path / where).exists(), where
    # a run outside the repository names the workbook's files by their place in it, with no link
    bare = RunDir(tmp_path / "run")
    copy_committed_run_to(bare.path, "quickstart", "avx2-host")
    outside = {what: (where, linked) for what, where, linked in summary.method_links(bare)}
    assert outside[summary.METHOD_PAGES["50_demand_map"]] == ("notebooks/50_demand_map.py", False)
    assert outside[path] == ("docs/method-path.md", False)
    assert str(tmp_path) not in summary.method_html(bare) and "<code>docs/method-path.md</code>" in summary.method_html(
        bare
    )
    assert 'class="stackbook-method"' in summary.method_html(committed) and "Kingman" in summary.method_html(committed)
