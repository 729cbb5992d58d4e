"""Prefix-cache state as part of the protocol: what the cache held when a point began, and the
counters that show what it served.

cold: the cache is flushed before every point (where the engine offers a flush; otherwise the
      passport says so), so no point profits from the one before.
warm: flushed, then primed with what the workload's requests share (the system prompt and every
      shared-prefix group), so each point measures a cache in steady use.

What the cache served is read beside the head every request shares by construction (the chat
template's opening, a fixed system prompt, the salt: measure.cache_split), which no flush or salt
can keep out; only reuse beyond it makes a point warm.
"""
from __future__ import annotations

import httpx

from stackbook.loadgen.drivers import Target, chat_once
from stackbook.loadgen.workload import shared_prefix_texts
from stackbook.measure.cache_split import construction_split


def prepare_point(state: str, adapter, target: Target, workload, tokenizer) -> dict:
    """Flush (both states) and prime (warm); returns what was done, for the point's record. The
    flush gets no longer than a request would: an engine that cannot erase its cache within the
    request timeout is not answering, and the point's requests will say so."""
    with httpx.Client(timeout=min(30.0, target.timeout_s), headers=target.headers) as client:
        flushed = adapter.reset_prefix_cache(client)
    out = {"state": state, "flush": flushed, "primed_requests": 0}
    if state == "warm":
        for text in primers(workload, tokenizer):
            messages = ([{"role": "system", "content": workload.system_prompt}] if workload.system_prompt else [])
            messages.append({"role": "user", "content": text})
            reply = chat_once(target, messages, **target.fields_for(1))
            out["primed_requests"] += 1
            if "error" in reply:
                out["prime_error"] = reply["error"]
                break
    return out


def primers(workload, tokenizer) -> list[str]:
    """What a warm cache should already hold: each shared prefix, or just the system prompt."""
    texts = shared_prefix_texts(workload, tokenizer)
    if texts:
        return [f"{t}\n" for t in texts]
    return ["Hello."] if workload.system_prompt else []


def cache_counters(delta: dict, records: list, series, shared_tokens: int = 0) -> dict:
    """Prefix-cache use during a point: the engine's counters (where the arm's kind names them)
    and the cached prompt tokens the replies reported, each also told apart into the head every
    request shares by construction (`shared_tokens`: the salt's) and the workload's own reuse."""
    def total(names):
        vals = [v for k, v in delta.items() if k.split("{", 1)[0] in names]
        return sum(vals) if vals else None
    hits, queries = total(series.cache_hit_counters), total(series.cache_query_counters)
    # The workload's requests only: a sentinel (a canary check) repeats its prompt in every point.
    measured = [r for r in records if r.phase == "measure" and r.ok and r.sentinel is None]
    reported = [r.cached_prompt_tokens for r in measured if r.cached_prompt_tokens is not None]
    prompt = sum((r.prompt_tokens_server or 0) for r in measured if r.cached_prompt_tokens is not None)
    return {
        "engine_hit_tokens": hits, "engine_query_tokens": queries,
        "engine_hit_rate": round(hits / queries, 4) if hits is not None and queries else None,
        "reported_cached_prompt_tokens": sum(reported) if reported else None,
        "reported_hit_rate": round(sum(reported) / prompt, 4) if reported and prompt else None,
    } | construction_split(records, shared_tokens, hits, queries)
