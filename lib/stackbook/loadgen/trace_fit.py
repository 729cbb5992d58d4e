"""Fitting a trace to the model and the budget at hand without breaking its structure: whole
sessions are kept or left out, never cut, so every kept session keeps its steps, their order and
their shared prefixes (an agent session keeps its subagents: they are kept or left out with it);
what was left out, and why, is counted on the trace (the passport shows it). Or every length is
scaled by one declared factor, block structure kept (`scaled`): never a prompt cut on its own."""
from __future__ import annotations

import dataclasses
import math

from stackbook.loadgen.trace_records import Trace, TraceRequest


def session_of(r: TraceRequest, index: int) -> str:
    """A request's session (a subagent's: the session it was started from); a request logged
    without one is a session of its own."""
    if r.family is not None:
        return r.family
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


# A scaled block shorter than this cannot carry the words that make two blocks' texts differ.
MIN_SCALED_BLOCK_TOKENS = 8


def scaled(trace: Trace, scale: float) -> Trace:
    """Every prompt and reply scaled by `scale`, the block structure kept: a block of B tokens
    becomes one of B x scale (a whole number of tokens), a prompt of n tokens ceil(n x scale), so
    each request keeps its block ids and their count; replies round(out x scale), at least 1;
    times and tool times unchanged."""
    size = trace.block_tokens
    if size and any(r.hash_ids for r in trace.requests):
        new = size * scale
        if abs(new - round(new)) > 1e-9 or round(new) < MIN_SCALED_BLOCK_TOKENS:
            raise ValueError(f"length_scale {scale:g} makes the trace's {size}-token blocks {new:g} tokens; a scale "
                             f"must give whole blocks of at least {MIN_SCALED_BLOCK_TOKENS} tokens (a multiple of "
                             f"1/{size}, at least {MIN_SCALED_BLOCK_TOKENS}/{size})")
        size = round(new)
    requests = [dataclasses.replace(r, prompt_tokens=max(1, math.ceil(r.prompt_tokens * scale - 1e-9)),
                                    output_tokens=max(1, round(r.output_tokens * scale))) for r in trace.requests]
    left_out = dict(trace.left_out)
    return dataclasses.replace(trace, requests=requests, block_tokens=size, left_out=left_out)


def fitting_scale(trace: Trace, context: int) -> float | None:
    """The largest length_scale under which every request fits `context` (on the grid of whole
    scaled blocks where the trace has blocks, else in hundredths); None where none does."""
    size = trace.block_tokens if any(r.hash_ids for r in trace.requests) else None
    steps = range(size, MIN_SCALED_BLOCK_TOKENS - 1, -1) if size else range(100, 0, -1)
    for k in steps:
        s = k / (size or 100)
        if all(math.ceil(r.prompt_tokens * s - 1e-9) + max(1, round(r.output_tokens * s)) <= context
               for r in trace.requests):
            return s
    return None
