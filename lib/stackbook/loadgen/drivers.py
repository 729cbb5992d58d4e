"""The streaming client and the closed-loop driver: raw per-chunk timing for every request."""
from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import gc
import json
import ssl
import sys
import time
from dataclasses import dataclass, field

import httpx
import uvloop

from stackbook.loadgen.http_client import STANDARD_HEADERS, StreamClient, refuse_proxy, tls_context
from stackbook.loadgen.loop_lag import LoopLag
from stackbook.loadgen.phases import Phase
from stackbook.loadgen.rotating_client import RotatingClient
from stackbook.loadgen.records import NOT_ANSWERED, RecordWriter, RequestRecord
from stackbook.loadgen.replies import Sent, classify_status, record_of
from stackbook.loadgen.sent_content import redacted
from stackbook.loadgen.workload import PromptSpec

MAX_SLEEP_S = 0.05


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
    on_send: object = None  # callable(dict): each body as it is sent, with its point, index and send offset
    # The API's own path for chat completions after the server's root (base path and query kept).
    chat_path: str = "/v1/chat/completions"
    # The name the API gives the output-length bound (the hosted OpenAI API: max_completion_tokens).
    max_tokens_field: str = "max_tokens"
    ca_bundle: str | None = None  # PEM file of the CA that signed an https server's certificate
    exact_lengths: bool = True  # False where the engine cannot force a length: replies may end early
    private: bool = False  # a request log's own content: bodies kept as digests, replies as lengths only
    # Replicas the client itself sends to in turn (routing's client round robin); empty: base_url alone.
    replica_urls: tuple[str, ...] = ()

    def stream_client(self) -> StreamClient | RotatingClient:
        if self.replica_urls:
            return RotatingClient(list(self.replica_urls), ca_bundle=self.ca_bundle)
        return StreamClient(self.base_url, ca_bundle=self.ca_bundle)

    def fields_for(self, output_tokens: int | None) -> dict:
        if output_tokens is None or self.length_for is None:
            return self.length_fields
        return self.length_for(output_tokens)


def request_body(target: Target, messages: list, stream: bool = True, output_tokens: int | None = None,
                 schema: dict | None = None, natural_end: bool = False, **extra) -> dict:
    """The chat request. With a schema the reply is JSON that ends where the object closes, so only
    max_tokens bounds it (forcing the length would fight the grammar); a natural end likewise."""
    if natural_end and schema is None:
        lengths = {"max_tokens": output_tokens or target.length_fields.get("max_tokens")}
    elif schema is not None:
        n = output_tokens or target.length_fields.get("max_tokens")
        lengths = {"max_tokens": n, "response_format": {
            "type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}}}
    else:
        lengths = target.fields_for(output_tokens)
    body = {"model": target.model, "messages": messages, "stream": stream, **target.sampling, **lengths, **extra}
    if target.max_tokens_field != "max_tokens" and "max_tokens" in body:
        body[target.max_tokens_field] = body.pop("max_tokens")
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


@contextlib.contextmanager
def collector_paused():
    """No garbage-collection pauses while a point runs: a full collection can hold the event loop
    for tens of milliseconds, which would show up as schedule lag and inflated latencies. The
    collection runs once the point is over."""
    was, interval = gc.isenabled(), sys.getswitchinterval()
    gc.disable()
    # A busy helper thread (the record writer, a sampler) keeps the interpreter lock for up to
    # the switch interval, 5 ms by default, before the event loop gets it back: shorten it.
    sys.setswitchinterval(0.0005)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)
        if was:
            gc.enable()
        gc.collect()


async def send_chat(client: StreamClient, target: Target, prompt: PromptSpec, *, base: dict, t0: float,
                    scheduled_s: float, messages: list | None = None, output_tokens: int | None = None,
                    prompt_tokens_client: int | None = None, turn: int = 0) -> Sent:
    """Send one streaming chat request and wait for its reply; every SSE chunk is timed by the
    arrival of its bytes. `messages` and the lengths override the prompt's own (later turns of a
    conversation). The reply is decoded later, by `record_of`."""
    n_out = output_tokens if output_tokens is not None else prompt.output_tokens
    body = request_body(target, messages or prompt.messages, output_tokens=n_out, schema=prompt.schema,
                        natural_end=prompt.natural_end)
    if prompt.sentinel:  # filed apart whatever its position: it adds load, never latency statistics
        base = dict(base, phase=Phase.SENTINEL, sentinel=prompt.sentinel)
    rec = dict(base, request_index=prompt.index, scheduled_s=scheduled_s,
               prompt_tokens_client=prompt_tokens_client if prompt_tokens_client is not None
               else prompt.prompt_tokens_client,
               output_tokens_requested=body.get(target.max_tokens_field, 0),
               length_controlled=not prompt.natural_end and target.exact_lengths,
               prefix_group=prompt.group, turn=turn,
               conversation=prompt.index if prompt.follow_ups else None)
    payload = json.dumps(body).encode()
    sent_unix = time.time()
    sent = time.perf_counter() - t0
    if target.on_send is not None:
        target.on_send({"point": rec.get("point", ""), "attempt": rec.get("attempt", 0), "phase": rec.get("phase", ""),
                        "request_index": prompt.index, "turn": turn, "scheduled_s": scheduled_s, "sent_s": sent,
                        "body": redacted(body) if target.private else body})
    reply = await client.post(target.chat_path, payload, target.timeout_s, target.headers)
    return Sent(rec, prompt, target, body, t0, sent, sent_unix, reply)


async def stream_chat(client: StreamClient, target: Target, prompt: PromptSpec, tokenizer, **kwargs) -> RequestRecord:
    """Send one streaming chat request and return its record (see `send_chat`)."""
    return record_of(await send_chat(client, target, prompt, **kwargs), tokenizer)


async def run_prompt(client: StreamClient, target: Target, prompt: PromptSpec, tokenizer, *, base: dict,
                     t0: float, scheduled_s: float, finisher: "Finisher") -> bool:
    """One request, or a whole conversation: each later turn carries the history with the
    model's actual replies, and is sent when the previous turn has ended (a user who waits for
    the answer). Every turn is filed as it completes; a failed turn ends the conversation. A
    single request's record is left to the finisher: its sender goes on at once. Returns whether
    the engine answered at all (False: the request timed out or lost its connection)."""
    sent = await send_chat(client, target, prompt, base=base, t0=t0, scheduled_s=scheduled_s)
    if not prompt.follow_ups:
        finisher.submit(sent)
        return sent.reply.error_class not in NOT_ANSWERED
    rec = record_of(sent, tokenizer)
    finisher.file(rec)
    messages = list(prompt.messages)
    history_tokens = prompt.prompt_tokens_client
    for turn, (content, n_user, n_out) in enumerate(prompt.follow_ups, start=1):
        if not rec.ok:
            return rec.error_class not in NOT_ANSWERED
        messages += [{"role": "assistant", "content": rec.output_text}, {"role": "user", "content": content}]
        history_tokens += rec.output_tokens_client + n_user
        rec = await stream_chat(client, target, prompt, tokenizer, base=base, t0=t0,
                                scheduled_s=time.perf_counter() - t0, messages=messages, output_tokens=n_out,
                                prompt_tokens_client=history_tokens, turn=turn)
        finisher.file(rec)
    return rec.error_class not in NOT_ANSWERED


class Finisher:
    """Builds and files the records of ended replies beside the sending: one record per turn of
    the loop, so that at hundreds of streams the replies ending together never hold the
    receiving of the others' bytes (nor the next sends) for more than one record's work."""

    def __init__(self, tokenizer, file):
        self.tokenizer, self.file = tokenizer, file
        self._queue: collections.deque[Sent] = collections.deque()
        self._wake = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task | None = None

    def submit(self, sent: Sent) -> None:
        self._queue.append(sent)
        self._wake.set()

    async def _run(self) -> None:
        while True:
            while self._queue:
                self.file(record_of(self._queue.popleft(), self.tokenizer))
                await asyncio.sleep(0)
            if self._closing:
                return
            self._wake.clear()
            await self._wake.wait()

    async def __aenter__(self) -> "Finisher":
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc) -> None:
        self._closing = True
        self._wake.set()
        await self._task


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


def phases(n: int, warmup: int, cooldown: int):
    """Request index -> its phase: the first `warmup` and last `cooldown` are not measured."""
    return lambda i: Phase.WARMUP if i < warmup else Phase.COOLDOWN if i >= n - cooldown else Phase.MEASURE


async def closed_loop(target: Target, prompts: list[PromptSpec], tokenizer, *, concurrency: int,
                      warmup: int, writer: RecordWriter | None, base: dict, progress=None,
                      alive=lambda: True, cooldown: int = 0, start: float | None = None,
                      positions: list[int] | None = None, total: int | None = None,
                      probe: LoopLag | None = None) -> list[RequestRecord]:
    """`concurrency` clients, each sending its next prompt when its previous reply ends.

    The first `warmup` prompts and the last `cooldown` ones are sent like the others and
    recorded as phases 'warmup' and 'cooldown'; they never enter the latency statistics, but
    keep the engine at the configured concurrency while the measured requests run.
    An engine that answers none of the point's first `concurrency` requests (each timed out, or lost
    its connection) is frozen or gone: the clients stop there rather than wait out every request's
    timeout in turn, and the sweep calls the engine not answering.
    A share of a point run by several client processes passes the point's shared `start`
    (a `time.perf_counter()` value: the system-wide monotonic clock), each prompt's position in
    the whole point and the point's `total`, which the phases are counted against. A `probe`
    samples the loop's own delay while the requests run.
    """
    phase_of = phases(total or len(prompts), warmup, cooldown)
    queue: asyncio.Queue = asyncio.Queue()
    for i, p in zip(positions or range(len(prompts)), prompts):
        queue.put_nowait((i, p))
    out: list[RequestRecord] = []
    finisher = Finisher(tokenizer, lambda rec: keep(rec, out, writer, progress, alive))
    async with target.stream_client() as client, finisher:
        # The clients' connections are opened before the clock starts: a storm of connects at
        # the first sends would be the client's own doing, not the engine's.
        await client.preopen(concurrency)
        t0 = start if start is not None else time.perf_counter()
        await sleep_until(t0)
        if probe is not None:
            probe.start()

        unanswered = [0, False]  # requests in a row the engine did not answer; whether it answered one

        async def worker() -> None:
            while unanswered[1] or unanswered[0] < concurrency:
                try:
                    i, p = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                answered = await run_prompt(client, target, p, tokenizer, base=dict(base, phase=phase_of(i)), t0=t0,
                                            scheduled_s=time.perf_counter() - t0, finisher=finisher)
                unanswered[0] = 0 if answered else unanswered[0] + 1
                unanswered[1] = unanswered[1] or answered

        try:
            await asyncio.gather(*(worker() for _ in range(concurrency)))
        finally:
            if probe is not None:
                probe.stop()
    return out


async def sleep_until(deadline: float) -> None:
    """Sleep in short steps: the kernel lets a long wait end late by 0.1% of its length (timer
    slack: 8 ms after an 8 s gap), and the loop's millisecond timers may wake early; loop until
    the deadline (a `time.perf_counter()` value) has truly passed (never early)."""
    while (delay := deadline - time.perf_counter()) > 0:
        await asyncio.sleep(min(delay, MAX_SLEEP_S))


async def open_loop(target: Target, prompts: list[PromptSpec], tokenizer, *, schedule: list[float], warmup: int,
                    writer: RecordWriter | None, base: dict, progress=None, alive=lambda: True,
                    cooldown: int = 0, start: float | None = None, positions: list[int] | None = None,
                    total: int | None = None, probe: LoopLag | None = None) -> list[RequestRecord]:
    """Send prompt i at t0 + schedule[i], whatever the replies are doing (open loop).

    Deadlines are absolute, so a late send never delays the next; the lag of each send behind its
    deadline is in the record (sent_s - scheduled_s). `start`, `positions` and `total` as in
    `closed_loop`: a client process sending one share of a point keeps the point's clock.
    """
    phase_of = phases(total or len(prompts), warmup, cooldown)
    out: list[RequestRecord] = []
    finisher = Finisher(tokenizer, lambda rec: keep(rec, out, writer, progress, alive))
    async with target.stream_client() as client, finisher:
        t0 = start if start is not None else time.perf_counter()
        if probe is not None:
            probe.start()

        async def one(i: int, p: PromptSpec, at: float) -> None:
            await run_prompt(client, target, p, tokenizer, base=dict(base, phase=phase_of(i)), t0=t0, scheduled_s=at,
                             finisher=finisher)

        tasks = []
        try:
            for i, p, at in zip(positions or range(len(prompts)), prompts, schedule):
                await sleep_until(t0 + at)
                tasks.append(asyncio.create_task(one(i, p, at)))
            await asyncio.gather(*tasks)
        finally:
            if probe is not None:
                probe.stop()
    return out


def _run_on_fast_loop(coro):
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


def run_sync(coro):
    """Run a coroutine to completion on its own uvloop event loop; inside a Jupyter kernel (whose
    loop is already running) it runs on a worker thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run_on_fast_loop(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(_run_on_fast_loop, coro).result()


def run_closed_loop(*args, **kwargs) -> list[RequestRecord]:
    with collector_paused():
        return run_sync(closed_loop(*args, **kwargs))


def run_open_loop(*args, **kwargs) -> list[RequestRecord]:
    with collector_paused():
        return run_sync(open_loop(*args, **kwargs))


def chat_once(target: Target, messages: list, timeout_s: float = 120.0, **extra) -> dict:
    """One non-streaming request (canaries): the parsed JSON reply, or an error description."""
    body = request_body(target, messages, stream=False, **extra)
    refuse_proxy(target.base_url)  # the same direct connection as the load generator's
    verify = tls_context(target.ca_bundle) if target.base_url.startswith("https://") else True
    try:
        with httpx.Client(verify=verify, trust_env=False, timeout=timeout_s) as c:
            r = c.post(target.base_url + target.chat_path, json=body,
                       headers={**STANDARD_HEADERS, **target.headers})
    except httpx.ConnectError as err:
        if isinstance(err.__context__, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(err):
            return {"error": f"TLS: the server's certificate was not verified ({err}); if it is signed by a private "
                             "CA, give that CA's PEM file as engine.ca_bundle", "error_class": "transport"}
        return {"error": f"{type(err).__name__}: {err}", "error_class": "transport"}
    except httpx.HTTPError as err:
        return {"error": f"{type(err).__name__}: {err}", "error_class": "transport"}
    if r.status_code != 200:
        return {"error": f"HTTP {r.status_code}: {r.text[:300]}", "error_class": classify_status(r.status_code),
                "status": r.status_code, "retry_after": r.headers.get("retry-after")}  # for gate.rate_limit
    return r.json()
