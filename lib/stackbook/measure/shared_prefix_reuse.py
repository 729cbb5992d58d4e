"""The reuse a shared-prefix workload implies: what one infinite cache in front of every replica
would serve of a point's own prompts, each request after its group's first reusing the group's
prefix. Beside it, what the replies say was served from cache. Pure: records in, rates out."""
from __future__ import annotations


def implied_shared_prefix(records: list, prefix_tokens: int) -> float | None:
    """The share of the point's prompt tokens an infinite cache would serve: each request after
    its group's first (in sending order) reuses the group's `prefix_tokens`."""
    done = sorted((r for r in records if r.ok and r.prompt_tokens_server is not None), key=lambda r: r.sent_s)
    seen: set[int] = set()
    reused = 0
    for r in done:
        if r.prefix_group is not None:
            reused += prefix_tokens if r.prefix_group in seen else 0
            seen.add(r.prefix_group)
    total = sum(r.prompt_tokens_server for r in done)
    return round(reused / total, 4) if total else None


def reported_hit_rate(records: list) -> float | None:
    """Cached prompt tokens the replies reported over their prompt tokens: the realized rate."""
    done = [r for r in records if r.ok and r.cached_prompt_tokens is not None and r.prompt_tokens_server]
    total = sum(r.prompt_tokens_server for r in done)
    return round(sum(r.cached_prompt_tokens for r in done) / total, 4) if total else None
