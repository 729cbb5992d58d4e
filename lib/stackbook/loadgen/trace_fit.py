"""Fitting a trace to the model and the budget at hand without breaking its structure: whole
sessions are kept or left out, never cut, so every kept session keeps its steps, their order and
their shared prefixes; what was left out, and why, is counted on the trace (the passport shows it)."""
from __future__ import annotations

import dataclasses

from stackbook.loadgen.trace_records import Trace, TraceRequest


def session_of(r: TraceRequest, index: int) -> str:
    """A request's session; a request logged without one is a session of its own."""
    return r.session if r.session is not None else f"row {index}"


def too_long(trace: Trace, context: int) -> list[tuple[str, int, int]]:
    """(session, row, tokens) of every request whose prompt and reply exceed `context` tokens."""
    return [(session_of(r, i), i, r.prompt_tokens + r.output_tokens) for i, r in enumerate(trace.requests)
            if r.prompt_tokens + r.output_tokens > context]


def fitted(trace: Trace, sessions: int | None = None, context: int | None = None) -> Trace:
    """The trace with every session that holds a request longer than `context` left out (when
    given), then only its first `sessions` sessions by first arrival (when given); timestamps
    start again at the first kept request."""
    requests, left_out = list(trace.requests), dict(trace.left_out)
    if context is not None:
        drop = {s for s, _, _ in too_long(trace, context)}
        if drop:
            left_out[f"sessions with a request over the context ({context} tokens)"] = len(drop)
            requests = [r for i, r in enumerate(trace.requests) if session_of(r, i) not in drop]
    if sessions is not None:
        order = list(dict.fromkeys(session_of(r, i) for i, r in enumerate(requests)))
        if len(order) > sessions:
            keep = set(order[:sessions])
            left_out[f"sessions beyond the first {sessions}"] = len(order) - sessions
            requests = [r for i, r in enumerate(requests) if session_of(r, i) in keep]
    if not requests:
        raise ValueError("no request of the trace is left once it is fitted: raise context_length or arrival.sessions")
    t0 = requests[0].timestamp_s
    requests = [dataclasses.replace(r, timestamp_s=round(r.timestamp_s - t0, 6)) for r in requests]
    return dataclasses.replace(trace, requests=requests, left_out=left_out)
