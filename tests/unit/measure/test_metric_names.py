"""The metric list is the one home of each metric's names: a metric added to it reaches the point
summary's columns, the protocol's allowed names and the compared figures' labels, and no module
outside it spells a metric's column by hand."""
import ast
import typing
from pathlib import Path

import pytest
from stackbook.analysis.decision import COMPARED, COMPARED_BY_NAME
from stackbook.analysis.tables import ACRONYMS, SIDE_BY_SIDE, column_title
from stackbook.config.protocol import Decision
from stackbook.evidence.results import PointSummary
from stackbook.measure.metric_definitions import (
    METRICS,
    Metric,
    acronyms,
    column,
    columns,
    compared_figures,
    compared_names,
    decided_names,
    figure,
    summary_columns,
)
from stackbook.loadgen.records import RequestRecord
from stackbook.measure.metrics import answered_figures, point_summary

LIB = Path(__file__).resolve().parents[3] / "lib" / "stackbook"
REGISTRY = LIB / "measure" / "metric_definitions.py"


def answered(n: int = 4) -> list[RequestRecord]:
    """n measured requests a second apart: scheduled 0.1 s before their send, the first of two chunks
    0.2 s after it, done 1 s after it."""
    return [RequestRecord(run_id="r", arm="a", point="c1-r0", phase="measure", concurrency=1, request_index=i,
                          scheduled_s=0.9 + i, sent_s=1.0 + i, first_token_s=1.2 + i, end_s=2.0 + i, sent_unix=0.0,
                          chunk_times_s=[1.2 + i, 2.0 + i], chunk_tokens=[1, 4], prompt_tokens_client=10,
                          output_tokens_server=5, output_tokens_client=5, output_tokens_requested=5)
            for i in range(n)]


def queue_ms(r) -> float:
    """A made-up metric for the test: the time from the schedule to the first token."""
    return (r.first_token_s - r.scheduled_s) * 1000


WITH_QUEUE = {**METRICS, "queue_ms": Metric("queue_ms", "ms", ("scheduled_s", "first_token_s"), queue_ms,
                                            label="QLAT", short="qlat", summarized="answered", interval=True,
                                            compared=("p50", "p99"), decided=("p50",))}


def test_lookups_spell_the_stored_names():
    assert column("tpot_ms", "p50") == "tpot_ms_p50" and column("e2e_ms", "ci95") == "e2e_ms_ci95"
    assert column("output_throughput_tok_s") == "output_throughput_tok_s"
    assert columns(("ttft_ms", "p50", "p99"), ("e2e_ms", "mean")) == ("ttft_ms_p50", "ttft_ms_p99", "e2e_ms_mean")
    f = figure("itl_ms", "p50")
    assert (f.name, f.column, f.label, f.unit, f.percentile) == ("itl_p50", "itl_ms_p50", "chunk ITL p50", "ms", 50)
    assert figure("output_throughput_tok_s").higher_is_better and figure("tpot_ms", "p50").unit == "ms"
    with pytest.raises(ValueError):
        column("tpot_ms", "p42")
    with pytest.raises(KeyError):
        column("tpot")


def test_the_names_committed_runs_are_read_by_stay_as_they_were():
    assert compared_names() == ("output_throughput", "ttft_p50", "tpot_p50", "itl_p50", "e2e_p50", "e2e_p99")
    assert decided_names() == ["output_throughput", "ttft_p50", "tpot_p50", "e2e_p50", "e2e_p99"]
    assert [c.column for c in COMPARED] == ["output_throughput_tok_s", "ttft_ms_p50", "tpot_ms_p50", "itl_ms_p50",
                                            "e2e_ms_p50", "e2e_ms_p99"]
    assert [c.label for c in COMPARED] == ["output throughput", "TTFT p50", "TPOT p50", "chunk ITL p50", "E2E p50",
                                           "E2E p99"]
    assert column_title("ttft_ms_p50") == "TTFT p50 (ms)" and column_title("itl_ms_p99") == "ITL p99 (ms)"
    assert SIDE_BY_SIDE["Latency (ms)"][:4] == ("ttft_ms_p50", "ttft_ms_p99", "ttft_ms_mean", "ttft_ms_ci95")


def test_the_consumers_read_the_list():
    """The protocol, the verdict and the tables take their names from the list, not a copy of it."""
    assert typing.get_args(Decision.model_fields["primary"].annotation) == compared_names()
    assert Decision().metrics == decided_names()
    assert COMPARED == compared_figures() and set(COMPARED_BY_NAME) == set(compared_names())
    assert acronyms().items() <= ACRONYMS.items()
    # the results model names no latency column the summary does not store
    stems = tuple(f"{m.name}_" for m in METRICS.values() if m.summarized)
    assert {f for f in PointSummary.model_fields if f.startswith(stems)} <= set(summary_columns())


def test_a_metric_added_to_the_list_reaches_summary_protocol_and_labels():
    records = answered()
    summary = answered_figures(records, WITH_QUEUE)
    wanted = {"queue_ms_mean", "queue_ms_p50", "queue_ms_p95", "queue_ms_p99", "queue_ms_max", "queue_ms_ci95"}
    assert wanted <= set(summary) and wanted <= set(summary_columns(WITH_QUEUE))
    assert summary["queue_ms_p50"] == pytest.approx(300.0)      # 1.2 - 0.9 s for every request
    assert set(summary) - wanted == set(answered_figures(records))  # the rest as without it
    assert {"qlat_p50", "qlat_p99"} <= set(compared_names(WITH_QUEUE))
    assert "qlat_p50" in decided_names(WITH_QUEUE) and "qlat_p99" not in decided_names(WITH_QUEUE)
    by_name = {f.name: f for f in compared_figures(WITH_QUEUE)}
    assert (by_name["qlat_p99"].column, by_name["qlat_p99"].label, by_name["qlat_p99"].unit) == \
        ("queue_ms_p99", "QLAT p99", "ms")
    assert acronyms(WITH_QUEUE)["qlat"] == "QLAT"


def test_the_point_summary_keeps_the_lists_statistics():
    from stackbook.config.protocol import Slo

    s = point_summary(answered(), Slo(ttft_ms=1000, tpot_ms=1000))
    assert set(summary_columns()) <= set(s)
    assert s["ttft_ms_p50"] == pytest.approx(200.0) and s["schedule_lag_ms_max"] == pytest.approx(100.0)


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def spelled_by_hand(root: Path = LIB) -> dict[str, set[str]]:
    """Module -> the metric column names (tpot_ms_p50) and compared percentile names (tpot_p50) it
    spells as string literals, docstrings aside."""
    names = set(summary_columns()) | {f.name for f in compared_figures() if f.percentile is not None}
    found = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        docs = _docstrings(tree)
        hits = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                and id(n) not in docs and n.value in names}
        if hits:
            found[str(path.relative_to(root))] = hits
    return found


def test_no_module_outside_the_list_spells_a_metric_column():
    found = spelled_by_hand()
    assert set(found) <= {str(REGISTRY.relative_to(LIB))}, found


def test_the_scan_sees_a_hand_spelling(tmp_path):
    (tmp_path / "m.py").write_text('"""tpot_ms_p50 in a docstring is words."""\nCOLS = ("tpot_ms_p50", "e2e_p99")\n')
    assert spelled_by_hand(tmp_path) == {"m.py": {"tpot_ms_p50", "e2e_p99"}}
