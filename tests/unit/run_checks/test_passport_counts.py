"""The passport counts every failure by its cause: the canaries' gating and out-of-scope checks
apart, and the sweep's truncation by whom."""
import json
from pathlib import Path

from stackbook.config.protocol import Protocol
from stackbook.run_checks.passport import failure_counts
from stackbook.gate.verdict import verdict
from stackbook.measure.sweep import summarize_sweep

CANARIES = Path(__file__).parents[1] / "data" / "quickstart-reference-llama-cpp-canary-results.json"


def _sweep(points: dict, **protocol) -> dict:
    return summarize_sweep(points, {}, 0, Protocol.model_validate(protocol))


def test_truncation_is_counted_by_whom_and_every_count_reaches_the_passport():
    """Two forced-length replies the engine ended short, one natural-end reply cut at its bound,
    one rejected at admission, one wrong sentinel: each lands in its own count."""
    points = {"c1-r0": {"concurrency": 1, "requests": 8, "completed": 6, "length_not_honoured": 2,
                        "errors": {"length_truncated": 1, "admission_rejected": 1},
                        "sentinels": {"sent": 1, "completed": 1, "completed_but_wrong": 1}}}
    sweep = _sweep(points)
    e = sweep["error_counts"]
    assert (e["length_truncated_by_engine"], e["length_truncated_by_budget"], e["length_truncated"]) == (2, 1, 3)
    counts = failure_counts(verdict(json.loads(CANARIES.read_text())), sweep)
    assert counts["under_load"] | {"sentinels": None} == {
        "admission_rejected": 1, "length_truncated_by_engine": 2, "length_truncated_by_budget": 1,
        "schema_or_tool_failure": "not checked: this workload asks for free text (response_format: text)",
        "completed_but_wrong": 1, "request_failed": 0, "sentinels": None}
    assert counts["canaries"]["out_of_scope"]["schema_or_tool_failure"] == 1
    assert counts["canaries"]["gating"]["failed"] == 0


def test_a_clean_sweep_counts_zero_everywhere():
    sweep = _sweep({"c1-r0": {"concurrency": 1, "requests": 8, "completed": 8, "length_not_honoured": 0,
                           "errors": {}}})
    under = failure_counts(None, sweep)["under_load"]
    assert (under["admission_rejected"], under["length_truncated_by_engine"], under["length_truncated_by_budget"],
            under["completed_but_wrong"], under["request_failed"]) == (0, 0, 0, 0, 0)
    assert failure_counts(None, sweep)["canaries"] == {"unknown": "the canary notebook did not run"}


def test_a_run_recorded_before_keeps_its_gating_counts():
    old = {"counts": {"admission_rejected": 0, "length_truncated": 0, "schema_or_tool_failure": 0,
                      "completed_but_wrong": 0}}
    counts = failure_counts(old, None)
    assert counts["canaries"]["gating"]["completed_but_wrong"] == 0
    assert counts["under_load"] == {"unknown": "the sweep did not run"}
