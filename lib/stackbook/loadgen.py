"""The streaming client and the closed-loop driver: raw per-chunk timing for every request."""
from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import time
from dataclasses import dataclass, field

import httpx

from .records import RecordWriter, RequestRecord
from .workload import PromptSpec, count_tokens


@dataclass
class Target:
    """Where requests go and how they are shaped for this engine."""
    base_url: str
    model: str
    sampling: dict
    length_fields: dict
    headers: dict = field(default_factory=dict)
    timeout_s: float = 120.0
    length_for: object = None  # callable: output tokens -> this engine's length fields (per-request lengths)

    def fields_for(self, output_tokens: int | None) -> dict:
        if output_tokens is None or self.length_for is None:
            return self.length_fields
        return self.length_for(output_tokens)


def request_body(target: Target, messages: list, stream: bool = True, output_tokens: int | None = None,
                 **extra) -> dict:
    body = {"model": target.model, "messages": messages, "stream": stream,
            **target.sampling, **target.fields_for(output_tokens), **extra}
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


def classify_status(status: int) -> str:
    if status in (429, 503):
        return "admission_rejected"
    return "http_error"


@contextlib.contextmanager
def collector_paused():
    """No garbage-collection pauses while a point runs: a full collection can hold the event loop
    for tens of milliseconds, which would show up as schedule lag and inflated latencies. The
    collection runs once the point is over."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
        gc.collect()


async def stream_chat(client: httpx.AsyncClient, target: Target, prompt: PromptSpec, tokenizer, *,
                      base: dict, t0: float, scheduled_s: float) -> RequestRecord:
    """Send one streaming chat request; time every SSE chunk against the perf counter."""
    body = request_body(target, prompt.messages, output_tokens=prompt.output_tokens)
    rec = dict(base, request_index=prompt.index, scheduled_s=scheduled_s,
               prompt_tokens_client=prompt.prompt_tokens_client,
               output_tokens_requested=body.get("max_tokens", 0))
    chunk_times: list[float] = []
    chunk_tokens: list[int] = []
    parts: list[str] = []
    usage: dict = {}
    finish = None
    status = None
    error_class, error = "none", None
    sent = time.perf_counter() - t0
    sent_unix = time.time()
    try:
        async with client.stream("POST", target.base_url + "/v1/chat/completions", json=body,
                                 headers=target.headers, timeout=target.timeout_s) as resp:
            status = resp.status_code
            if status != 200:
                text = (await resp.aread()).decode(errors="replace")[:500]
                error_class, error = classify_status(status), f"HTTP {status}: {text}"
            else:
                async for line in resp.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    now = time.perf_counter() - t0
                    try:
                        event = json.loads(data)
                    except json.JSONDecodeError:
                        error_class, error = "malformed_stream", f"invalid JSON in a stream chunk: {data[:200]}"
                        break
                    if "error" in event:
                        err = event["error"] if isinstance(event["error"], dict) else {"message": event["error"]}
                        code = err.get("code")
                        # Some servers reject inside an open stream instead of with HTTP 429/503.
                        rejected = code in (429, 503, "429", "503", "rate_limit_exceeded", "overloaded")
                        error_class = "admission_rejected" if rejected else "http_error"
                        error = f"error event in the stream: {str(err)[:400]}"
                        break
                    if event.get("usage"):
                        usage = event["usage"]
                    for choice in event.get("choices") or []:
                        delta = choice.get("delta") or {}
                        piece = delta.get("content") or delta.get("reasoning_content") or ""
                        if piece:
                            chunk_times.append(now)
                            chunk_tokens.append(count_tokens(tokenizer, piece))
                            parts.append(piece)
                        if choice.get("finish_reason"):
                            finish = choice["finish_reason"]
    except httpx.TimeoutException as err:
        error_class, error = "timeout", f"{type(err).__name__} after {target.timeout_s:.0f} s"
    except (httpx.TransportError, httpx.StreamError) as err:
        error_class, error = "transport", f"{type(err).__name__}: {err}"[:500]
    end = time.perf_counter() - t0
    if error_class == "none" and finish is None:
        error_class, error = "transport", "stream cut before a finish_reason (connection closed early)"
    text = "".join(parts)
    details = usage.get("prompt_tokens_details") or {}
    return RequestRecord(
        **rec, sent_s=sent, sent_unix=sent_unix, first_token_s=chunk_times[0] if chunk_times else None,
        end_s=end, chunk_times_s=chunk_times, chunk_tokens=chunk_tokens,
        prompt_tokens_server=usage.get("prompt_tokens"), output_tokens_server=usage.get("completion_tokens"),
        output_tokens_client=count_tokens(tokenizer, text), cached_prompt_tokens=details.get("cached_tokens"),
        finish_reason=finish, status=status, error_class=error_class, error=error, output_text=text)


def keep(rec: RequestRecord, out: list, writer: RecordWriter | None, progress, alive) -> None:
    """File a finished request: a transport failure of a dead engine is the engine's death; the
    record is appended to disk at once."""
    if rec.error_class in ("transport", "timeout") and not alive():
        rec.error_class = "engine_died"
    out.append(rec)
    if writer:
        writer.write(rec)
    if progress is not None:
        progress.update(1)


async def closed_loop(target: Target, prompts: list[PromptSpec], tokenizer, *, concurrency: int,
                      warmup: int, writer: RecordWriter | None, base: dict, progress=None,
                      alive=lambda: True, cooldown: int = 0) -> list[RequestRecord]:
    """`concurrency` clients, each sending its next prompt when its previous reply ends.

    The first `warmup` prompts and the last `cooldown` ones are sent like the others and
    recorded as phases 'warmup' and 'cooldown'; they never enter the latency statistics, but
    keep the engine at the configured concurrency while the measured requests run.
    """
    queue: asyncio.Queue = asyncio.Queue()
    for i, p in enumerate(prompts):
        queue.put_nowait((i, p))
    out: list[RequestRecord] = []
    limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=concurrency + 4)
    t0 = time.perf_counter()
    async with httpx.AsyncClient(limits=limits, timeout=target.timeout_s) as client:

        async def worker() -> None:
            while True:
                try:
                    i, p = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                phase = "warmup" if i < warmup else "cooldown" if i >= len(prompts) - cooldown else "measure"
                rec = await stream_chat(client, target, p, tokenizer, base=dict(base, phase=phase),
                                        t0=t0, scheduled_s=time.perf_counter() - t0)
                keep(rec, out, writer, progress, alive)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


async def open_loop(target: Target, prompts: list[PromptSpec], tokenizer, *, schedule: list[float], warmup: int,
                    writer: RecordWriter | None, base: dict, progress=None, alive=lambda: True,
                    cooldown: int = 0) -> list[RequestRecord]:
    """Send prompt i at t0 + schedule[i], whatever the replies are doing (open loop).

    Deadlines are absolute, so a late send never delays the next; the lag of each send behind its
    deadline is in the record (sent_s - scheduled_s).
    """
    out: list[RequestRecord] = []
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=64)
    async with httpx.AsyncClient(limits=limits, timeout=target.timeout_s) as client:
        t0 = time.perf_counter()

        async def one(i: int, p: PromptSpec, at: float) -> None:
            phase = "warmup" if i < warmup else "cooldown" if i >= len(prompts) - cooldown else "measure"
            rec = await stream_chat(client, target, p, tokenizer, base=dict(base, phase=phase), t0=t0, scheduled_s=at)
            keep(rec, out, writer, progress, alive)

        tasks = []
        for i, (p, at) in enumerate(zip(prompts, schedule)):
            delay = at - (time.perf_counter() - t0)
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i, p, at)))
        await asyncio.gather(*tasks)
    return out


def run_sync(coro):
    """Run a coroutine to completion; works inside a Jupyter kernel's running event loop too."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def run_closed_loop(*args, **kwargs) -> list[RequestRecord]:
    with collector_paused():
        return run_sync(closed_loop(*args, **kwargs))


def run_open_loop(*args, **kwargs) -> list[RequestRecord]:
    with collector_paused():
        return run_sync(open_loop(*args, **kwargs))


def chat_once(target: Target, messages: list, timeout_s: float = 120.0, **extra) -> dict:
    """One non-streaming request (canaries): the parsed JSON reply, or an error description."""
    body = request_body(target, messages, stream=False, **extra)
    try:
        r = httpx.post(target.base_url + "/v1/chat/completions", json=body, headers=target.headers,
                       timeout=timeout_s)
    except httpx.HTTPError as err:
        return {"error": f"{type(err).__name__}: {err}", "error_class": "transport"}
    if r.status_code != 200:
        return {"error": f"HTTP {r.status_code}: {r.text[:300]}", "error_class": classify_status(r.status_code)}
    return r.json()
