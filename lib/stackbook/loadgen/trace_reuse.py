"""The prefix reuse a block-hashed trace implies, counted as the formats' own tools count it: an
infinite cache at the trace's block size, requests taken in arrival order, and a request's leading
blocks already seen (stopping at its first unseen block: a prefix cache reuses prefixes) are its
hits. Two figures, because two are in use:

  hit_rate        prompt tokens found cached over prompt tokens: a request's seen leading blocks
                  times the block size (its partial last block counting its own tokens), summed,
                  over its input tokens, summed. This is what an engine's realized rate is set against.
  mean_hit_rate   the mean over requests of seen leading blocks over blocks: AIPerf analyze-trace's
                  theoretical cache hit rate (prefix_analyzer: first unseen index / len(hash_ids)),
                  which equals it on the same Mooncake lines at the same block size.

Both overall and per session depth (0: the sessions a trace starts; 1: their subagents; ...)."""
from __future__ import annotations

from stackbook.loadgen.trace_records import Trace, TraceRequest


def leading_hits(hash_ids: tuple[int, ...], seen: set) -> int:
    """How many of a request's leading blocks were seen before it (stopping at the first new one)."""
    n = 0
    for h in hash_ids:
        if h not in seen:
            break
        n += 1
    return n


def _figures(rows: list[tuple[int, int, int]], size: int) -> dict:
    """rows: (hits, blocks, prompt tokens) of each request."""
    cached = sum(min(h * size, p) for h, _, p in rows)
    prompt = sum(p for _, _, p in rows)
    return {"requests": len(rows), "hit_rate": cached / prompt if prompt else 0.0,
            "mean_hit_rate": sum(h / b for h, b, _ in rows) / len(rows) if rows else 0.0,
            "cached_tokens": cached, "prompt_tokens": prompt}


def implied_hit_rates(requests: list[TraceRequest], block_tokens: int) -> dict:
    """Both figures over `requests` (in arrival order) at `block_tokens`, overall and by depth."""
    seen: set = set()
    rows: list[tuple[int, int, int, int]] = []  # (depth, hits, blocks, prompt tokens)
    for r in requests:
        if not r.hash_ids:
            continue
        rows.append((r.depth, leading_hits(r.hash_ids, seen), len(r.hash_ids), r.prompt_tokens))
        seen.update(r.hash_ids)
    depths = sorted({d for d, *_ in rows})
    return _figures([x[1:] for x in rows], block_tokens) | {
        "block_tokens": block_tokens,
        "by_depth": {d: _figures([x[1:] for x in rows if x[0] == d], block_tokens) for d in depths}}


def implied_reuse(trace: Trace) -> dict | None:
    """The reuse a trace implies, with its blocks counted (None where it records no blocks)."""
    if not trace.block_tokens or not any(r.hash_ids for r in trace.requests):
        return None
    seen = {h for r in trace.requests for h in r.hash_ids}
    return implied_hit_rates(trace.requests, trace.block_tokens) | {
        "blocks": sum(len(r.hash_ids) for r in trace.requests), "distinct_blocks": len(seen),
        "depth_of": [r.depth for r in trace.requests]}
