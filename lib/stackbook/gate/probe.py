"""What an endpoint can do, observed rather than assumed; recorded in the passport."""
from __future__ import annotations

import dataclasses

import httpx

from stackbook.gate.rate_limit import counting, patient
from stackbook.loadgen.drivers import Target, run_sync, stream_chat
from stackbook.loadgen.workload import PromptSpec


def _stream_once(target: Target, tokenizer, length_fields: dict) -> dict:
    """One streamed request, its 429 waited out by back-off (the stream client keeps no headers,
    so a Retry-After goes unread here)."""
    t = dataclasses.replace(target, length_fields=length_fields, length_for=None)
    prompt = PromptSpec(0, [{"role": "user", "content": "Say hi."}], 0)

    async def go():
        async with target.stream_client() as client:
            return await stream_chat(client, t, prompt, tokenizer, base={
                "run_id": "probe", "arm": "probe", "point": "probe", "phase": "warmup", "concurrency": 1},
                t0=0.0, scheduled_s=0.0)

    return patient(lambda: run_sync(go()).model_dump())


def probe_endpoint(adapter, target: Target, tokenizer, realized: dict | None = None) -> dict:
    """Streaming usage, output-length control, tokens per chunk, metrics, cache reset, context."""
    n = 24
    out: dict = {}
    fields = adapter.output_length_fields(n)
    with counting() as tally:
        rec = _stream_once(target, tokenizer, fields)
    out["rate_limit_retries"] = tally.retries
    out["streaming_usage_reported"] = rec["output_tokens_server"] is not None
    # "Say hi." ends in a few tokens on its own: only a honoured length control gives exactly n.
    got = rec["output_tokens_server"] if rec["output_tokens_server"] is not None else rec["output_tokens_client"]
    out["output_length_honoured"] = got == n
    out["output_tokens_requested"] = n
    out["output_tokens_received"] = got
    out["length_fields_sent"] = sorted(k for k in fields if k != "max_tokens")
    chunks = rec["chunk_tokens"]
    out["tokens_per_chunk_mean"] = round(sum(chunks) / len(chunks), 2) if chunks else None
    out["decoding_fields"] = adapter.honoured_decoding_fields(adapter.protocol.decoding.resolved())
    base = adapter.base_url
    with adapter.http_client(timeout=10) as c:
        c.headers.update(target.headers)
        if adapter.metrics_path:
            try:
                out["metrics_path"] = (adapter.metrics_path if c.get(base + adapter.metrics_path).status_code == 200
                                       else None)
            except httpx.HTTPError:
                out["metrics_path"] = None
        else:
            out["metrics_path"] = None
        out["prefix_cache_reset"] = adapter.reset_prefix_cache(c)
        realized = realized or adapter.realized_capacity()
        served = realized.get("context_per_sequence") or realized.get("max_concurrency_context")
        if served is None:
            try:
                models = c.get(base + adapter.models_path).json().get("data") or [{}]
                served = models[0].get("max_model_len")
            except (httpx.HTTPError, ValueError):
                served = None
        out["served_context_length"] = served
    out["chat_template_sha256"] = adapter.identity().get("chat_template_sha256")
    return out


PROBE_LENGTH = 24  # "Say hi." ends well before 24 tokens unless the end-of-sequence token is ignored


def exact_length_accepted(target: Target, fields: dict, n: int = PROBE_LENGTH) -> tuple[bool, str]:
    """Whether the endpoint takes the engine fields that force an exact output length (ignore_eos,
    min_tokens) and honours them: one short request must come back with exactly n tokens. A
    hosted API answers 400 to a field it does not know; a server that ignores them stops early."""
    from stackbook.loadgen.drivers import chat_once
    t = dataclasses.replace(target, length_fields={"max_tokens": n, **fields}, length_for=None)
    reply = patient(lambda: chat_once(t, [{"role": "user", "content": "Say hi."}], timeout_s=target.timeout_s))
    if "error" in reply:
        return False, f"refused: {reply['error'][:200]}"
    got = (reply.get("usage") or {}).get("completion_tokens")
    if got != n:
        return False, f"accepted but not honoured: {got} tokens for {n} requested"
    return True, f"honoured: exactly {n} tokens"
