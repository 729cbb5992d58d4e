"""The workload a replayed trace sent, read from the arm's records.

A trace replay sends the log's own prompts and reply lengths; the campaign's synthetic workload
is never drawn. So the passport of such an arm states the lengths its measured requests carried,
with the trace as their source, instead of the unused synthetic settings.
"""
from __future__ import annotations

import statistics
from collections.abc import Iterable

from stackbook.loadgen.phases import Phase
from stackbook.loadgen.records import RequestRecord


def length_summary(values: Iterable[int]) -> dict | None:
    """Token counts as a compact distribution: how many, min, median, max (None for none)."""
    v = sorted(values)
    if not v:
        return None
    median = statistics.median(v)
    return {"requests": len(v), "min": v[0], "median": int(median) if float(median).is_integer() else median,
            "max": v[-1]}


def range_words(summary: dict) -> str:
    """"118 to 320 (median 209, 24 requests)", or the one value all requests shared."""
    if summary["min"] == summary["max"]:
        return f"{summary['min']:g} for all {summary['requests']} requests"
    return f"{summary['min']:g} to {summary['max']:g} (median {summary['median']:g}, {summary['requests']} requests)"


def trace_source(arrival: dict) -> str:
    """The trace as the passport names it: its path, format and digest."""
    digest = arrival.get("trace_sha256") or "not recorded"
    return f"the replayed trace {arrival.get('path')} ({arrival.get('format')} format, sha256 {digest})"


def sent_workload(records: list[RequestRecord], arrival: dict) -> dict:
    """The prompt and reply lengths the measured requests carried (latest attempts, every point):
    prompts as the client counted them and as the engine did (its count includes the chat
    template), and the reply lengths requested. The keys keep the synthetic workload's names
    (prompt_tokens, output_tokens), each a distribution of kind "as sent"."""
    measured = [r for r in records if r.phase == Phase.MEASURE]
    out: dict = {"kind": "trace", "source": trace_source(arrival),
                 "synthetic_workload": "not sent: every prompt and reply length came from the trace"}
    client = length_summary(r.prompt_tokens_client for r in measured)
    if client is None:
        out["unknown"] = "no measured request was recorded (the load sweep did not run)"
        return out
    engine = length_summary(r.prompt_tokens_server for r in measured if r.prompt_tokens_server is not None)
    replies = length_summary(r.output_tokens_requested for r in measured)
    out["counted"] = "the measured requests of every point, latest attempts"
    out["prompt_tokens"] = {"kind": "as sent", "counted_by": "the client's tokenizer, the text alone", **client}
    out["prompt_tokens_engine"] = ({"kind": "as sent", "counted_by": "the engine's usage, chat template included",
                                    **engine} if engine else {"unknown": "the engine reported no prompt counts"})
    out["output_tokens"] = {"kind": "as sent", "counted_by": "reply lengths requested, the trace's own", **replies}
    sentinels = sum(r.phase == Phase.SENTINEL for r in records)
    if sentinels:
        out["sentinels"] = f"{sentinels} known-answer canary prompts mixed in, not the trace's and not counted above"
    return out


def sent_words(workload: dict) -> tuple[str, str]:
    """(the prompt tokens, the output budget) in words, for the passport's one-line fields."""
    if "prompt_tokens" not in workload:
        why = f"from the trace; {workload.get('unknown', 'not recorded')}"
        return why, why
    prompts = f"the trace's prompts: {range_words(workload['prompt_tokens'])} by the client's count"
    engine = workload["prompt_tokens_engine"]
    if "unknown" not in engine:
        prompts += f"; {engine['min']:g} to {engine['max']:g} (median {engine['median']:g}) by the engine's"
    return prompts, f"per request, the trace's reply length: {range_words(workload['output_tokens'])}"
