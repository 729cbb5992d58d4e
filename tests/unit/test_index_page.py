"""The index's decision cell over committed runs: every line names its load and its pair, and the
summary counts every outcome, so no one load's line stands for the whole run."""
import json

import pytest
from stackbook.index_page import decision_lines, run_entry
from stackbook.locations import OUTPUTS_DIR


@pytest.mark.parametrize("run, unit",
                         [("quickstart/reference", "concurrency"), ("workloads/reference", "offered rate")])
def test_each_line_names_its_load_and_pair_and_the_summary_counts_them_all(run, unit):
    entry = run_entry(OUTPUTS_DIR / run)
    decisions = json.loads((OUTPUTS_DIR / run / "analysis.json").read_text())["decisions"]
    summary, items = decision_lines(entry)
    assert len(items) == len(decisions) > 1
    for d, item in zip(decisions, items):
        assert item.startswith(f"{unit} {d['load']:g}, {d['arm_a']} against {d['arm_b']}: {d['text']}")
    counts = [int(part.split()[0]) for part in summary.split(": ", 1)[1].split(", ")]
    assert sum(counts) == len(decisions)
    loads = sorted({d["load"] for d in decisions})
    assert summary.startswith(f"{len(decisions)} comparisons at {unit} {', '.join(f'{x:g}' for x in loads)}: ")
    ranked = sum(1 for d in decisions if d["leader"])
    assert (f"{ranked} ranked" in summary) == (ranked > 0)


def test_each_runs_line_opens_on_the_reports_five_answers():
    """The dashboard answers as the report's first screen does, above the whole decision: which arm,
    how sure, inside which SLO, at what cost, on which host."""
    from stackbook.index_page import _row

    entry = run_entry(OUTPUTS_DIR / "capacity/reference")
    assert [a.partition("? ")[0] for a in entry.answer] == [
        "Which arm", "How sure", "Inside which SLO", "At what cost", "On which host"]
    assert entry.answer[0].startswith("Which arm? On output throughput, the preregistered primary figure: run ")
    assert "TTFT ≤ 1000 ms" in entry.answer[2] or "TTFT ≤ 1,000 ms" in entry.answer[2], entry.answer[2]
    assert "$0.085 an hour" in entry.answer[3] and "AMD EPYC" in entry.answer[4]
    row = _row(entry)
    assert row.index("<b>Which arm?</b>") < row.index("<b>How sure?</b>") < row.index("<b>On which host?</b>") \
        < row.index("<details>")
    assert run_entry(OUTPUTS_DIR / "quickstart/compare-reference-vs-avx2-host").answer == []
