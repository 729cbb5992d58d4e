"""A streamed reply decoded into its request record, after the reply has ended: the SSE chunks
parsed in one call, their tokens counted, the failure classified. None of this runs while the
reply's bytes arrive."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from functools import lru_cache

import orjson

from stackbook.loadgen.http_client import StreamedReply
from stackbook.loadgen.records import RequestRecord
from stackbook.loadgen.workload import PromptSpec, count_each, count_tokens


@dataclass
class Sent:
    """A request sent and its reply, with what its record needs from the sending side."""
    rec: dict
    prompt: PromptSpec
    target: object
    body: dict
    t0: float
    sent: float
    sent_unix: float
    reply: StreamedReply


def classify_status(status: int) -> str:
    if status in (429, 503):
        return "admission_rejected"
    return "http_error"


@lru_cache(maxsize=8)
def _validator(schema_json: str):
    # Imported on first use, not at the top: most processes that import the load generator never
    # check a reply's JSON (the IRI grammar jsonschema would build is declined in stackbook/__init__.py).
    import jsonschema

    return jsonschema.Draft202012Validator(json.loads(schema_json))


def schema_problem(text: str, schema: dict) -> str | None:
    """Why the reply is not JSON under the schema, or None when it is."""
    try:
        doc = json.loads(text)
    except ValueError as err:
        return f"the reply is not JSON ({err.msg} at {err.pos}): {text[:120]!r}"
    errors = sorted(_validator(json.dumps(schema, sort_keys=True)).iter_errors(doc), key=lambda e: e.path)
    return f"the reply breaks the schema: {errors[0].message[:200]}" if errors else None


def _decoded(events: list[tuple[float, bytes]]) -> list:
    """The JSON of each payload up to `[DONE]`, decoded in one call (a stream's hundreds of small
    decodes cost more than their parsing); a payload that is not JSON is left as its bytes."""
    datas = [data for _, data in events]
    if b"[DONE]" in datas:
        datas = datas[:datas.index(b"[DONE]")]
    try:
        return orjson.loads(b"[" + b",".join(datas) + b"]")
    except orjson.JSONDecodeError:
        pass
    out = []
    for data in datas:  # find the payload that is not JSON
        try:
            out.append(orjson.loads(data))
        except orjson.JSONDecodeError:
            return out + [data]
    return out


def _parse_events(events: list[tuple[float, bytes]], t0: float, tokenizer) -> dict:
    """Decode the SSE payloads of one reply (after it ended, off the receiving path). The loop is
    per chunk, so it does per chunk only what a content chunk needs."""
    chunk_times: list[float] = []
    parts: list[str] = []
    usage: dict = {}
    finish = None
    first_event = None
    error_class, error = "none", None
    for (at, data), event in zip(events, _decoded(events)):
        if type(event) is not dict:
            what = "invalid JSON in a stream chunk" if isinstance(event,
                                                                  bytes) else "a stream chunk that is not an object"
            error_class, error = "malformed_stream", f"{what}: {data[:200]!r}"
            break
        if "error" in event:
            err = event["error"] if isinstance(event["error"], dict) else {"message": event["error"]}
            code = err.get("code")
            # Some servers reject inside an open stream instead of with HTTP 429/503.
            rejected = code in (429, 503, "429", "503", "rate_limit_exceeded", "overloaded")
            error_class = "admission_rejected" if rejected else "http_error"
            error = f"error event in the stream: {str(err)[:400]}"
            break
        choices = event.get("choices")
        if choices:
            if first_event is None:
                first_event = at - t0
            for choice in choices:
                delta = choice.get("delta") or {}
                piece = delta.get("content") or delta.get("reasoning_content")
                if piece:
                    chunk_times.append(at - t0)
                    parts.append(piece)
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
        if event.get("usage"):
            usage = event["usage"]
    return {"chunk_times": chunk_times, "chunk_tokens": count_each(tokenizer, parts),
            "text": "".join(parts), "usage": usage, "finish": finish, "error_class": error_class, "error": error,
            "first_event": first_event}


def record_of(s: Sent, tokenizer) -> RequestRecord:
    """The request's record: its timings by the reply's own clock (on the wire to its last bytes,
    not the turns of the loop around them) and its outcome."""
    reply, prompt, body, target, t0 = s.reply, s.prompt, s.body, s.target, s.t0
    end = (reply.ended_at or time.perf_counter()) - t0
    sent = reply.sent_at - t0 if reply.sent_at is not None else s.sent
    status = reply.status
    parsed = {"chunk_times": [], "chunk_tokens": [], "text": "", "usage": {}, "finish": None,
              "error_class": "none", "error": None, "first_event": None}
    error_class, error = reply.error_class, reply.error
    if status is not None and status != 200:
        error_class = classify_status(status)
        error = f"HTTP {status}: {reply.body.decode(errors='replace')[:500]}"
    elif status == 200:
        parsed = _parse_events(reply.events, t0, tokenizer)
        if parsed["error_class"] != "none":
            error_class, error = parsed["error_class"], parsed["error"]
        elif error_class == "none" and parsed["finish"] is None:
            error_class, error = "transport", "stream cut before a finish_reason (connection closed early)"
        elif error_class == "none" and not prompt.natural_end:
            pass  # a forced length ends at the limit by design: finish_reason "length" is expected
        elif error_class == "none" and parsed["finish"] == "length":
            # The reply was expected to end by itself (a JSON object closing) and hit the token
            # limit instead: that is truncation, whatever the half-written text looks like.
            error_class, error = "length_truncated", (f"the reply hit max_tokens ({body.get(target.max_tokens_field)}) "
                                                      "before ending by itself")
        elif error_class == "none" and prompt.schema is not None:
            problem = schema_problem(parsed["text"], prompt.schema)
            if problem:
                error_class, error = "schema_failure", problem
    usage = parsed["usage"]
    details = usage.get("prompt_tokens_details") or {}
    chunk_times = parsed["chunk_times"]
    return RequestRecord(
        **s.rec, sent_s=sent, sent_unix=s.sent_unix, connect_s=reply.connect_s, first_token_s=chunk_times[0]
        if chunk_times else None,
        first_event_s=parsed["first_event"], end_s=end, chunk_times_s=chunk_times, chunk_tokens=parsed["chunk_tokens"],
        prompt_tokens_server=usage.get("prompt_tokens"), output_tokens_server=usage.get("completion_tokens"),
        output_tokens_client=count_tokens(tokenizer, parsed["text"]), cached_prompt_tokens=details.get("cached_tokens"),
        finish_reason=parsed["finish"], status=status, error_class=error_class, error=error,
        output_text="" if s.target.private else parsed["text"],  # a private log's reply: its length only
        engine_timings=reply.engine_timings if status == 200 else None)
