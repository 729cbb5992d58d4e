"""Cached prompt tokens told apart: the head every request shares by construction, and the reuse
of the workload's own content beyond it.

Every request opens with what no flush or salt can make unique: the chat template's head (its
default system prompt, the user header), a system prompt the protocol fixes, the point's salt. A
server that caches prompts serves that head to every request after the first, under a cold
protocol too (llama-server: 24 to 26 tokens of SmolLM2's template on each request), as hosted APIs
serve long shared prefixes. Only the reuse beyond it says whether a point profited from what was
sent before (another point, another arm, a primed prefix), so only that makes a point warm.
"""
from __future__ import annotations

from stackbook.loadgen.workload import count_tokens

# The workload's own tokens served from cache, as a share of them, at or under which a point reads
# cold: two random prompts may open with the same word, which is no warm cache.
COLD_WITHIN = 0.02


def salt_tokens(salt: str, tokenizer) -> int:
    """The salt's length in prompt tokens: part of the head every request of its point shares."""
    return count_tokens(tokenizer, salt)


def construction_tokens(r, shared_tokens: int = 0) -> int:
    """The prompt tokens of one request that every request carries by construction: what the chat
    template and a fixed system prompt add around the workload's content (the server's count less
    the client's, which counts the content alone) and the salt (`shared_tokens`). The template's
    closing (the assistant header) is in that difference too: a cache reaches it only after
    serving the whole content, so it never hides reuse of the content."""
    if r.prompt_tokens_server is None or not r.prompt_tokens_client:
        return shared_tokens
    return max(0, r.prompt_tokens_server - r.prompt_tokens_client) + shared_tokens


def construction_split(records: list, shared_tokens: int = 0, engine_hits: float | None = None,
                       engine_queries: float | None = None) -> dict:
    """One point's cached tokens told apart. From the replies of the workload's measured requests:
    the head every request shares (the median over requests of the cached tokens inside its
    construction tokens: the first request after a flush finds none) and the share of the
    workload's own tokens served beyond it. From the engine's counters, which count every request
    of the point and none apart: the hits beyond the construction tokens of every request it
    answered, as a share of the tokens beyond them. Empty where neither reports."""
    out: dict = {}
    measured = [r for r in records if r.phase == "measure" and r.ok and r.sentinel is None
                and r.cached_prompt_tokens is not None]
    if measured:
        allowed = [construction_tokens(r, shared_tokens) for r in measured]
        heads = sorted(min(r.cached_prompt_tokens, a) for r, a in zip(measured, allowed))
        beyond = sum(r.cached_prompt_tokens for r in measured) - sum(heads)
        own = sum(max(0, (r.prompt_tokens_server or r.prompt_tokens_client) - a) for r, a in zip(measured, allowed))
        out.update(shared_head_tokens=heads[len(heads) // 2], workload_cached_tokens=beyond,
                   workload_hit_rate=round(beyond / own, 4) if own else None)
    if engine_hits is not None and engine_queries:
        answered = [r for r in records if r.prompt_tokens_server is not None]
        allowed_all = sum(min(construction_tokens(r, shared_tokens), r.prompt_tokens_server) for r in answered)
        own_all = engine_queries - allowed_all
        out["engine_workload_hit_rate"] = (round(max(0.0, engine_hits - allowed_all) / own_all, 4)
                                           if own_all > 0 else None)
    return out


def workload_reuse(point_cache: dict) -> float | None:
    """The most of the workload's own tokens a point's replies or counters say came from cache;
    None where the point was recorded without the split (its figures then hold every cached token)."""
    split = [point_cache[k] for k in ("workload_hit_rate", "engine_workload_hit_rate")
             if point_cache.get(k) is not None]
    return max(split) if split else None
