"""A zero-latency OpenAI-compatible streaming server: a calibration instrument for the harness.

It answers instantly, so whatever latency the client measures against it is the client's own
floor. It can also misbehave on purpose (per request, by model name `calibration-<mode>`) so the
harness's error handling is tested against each failure it must classify:
  ok, http_429, http_503, malformed_sse, invalid_json, truncated, error_event, slow_headers.
With `rate_limit_every` N it answers every Nth chat request (whatever its model) with 429 and,
when given, a `Retry-After` header: an endpoint's rate limit, which the gate must wait out.
It binds 127.0.0.1 unless told otherwise, and is never an engine: it generates no text.
With a `Pacing` (harness.pacing) it streams at a known TTFT and inter-token gap instead, and
records when it sent each event (GET /paced): the truth a client's timings are checked against.
With a `Knee` (harness.knee_scheduler) its streams come from a batch scheduler with a capacity
knee instead (harness.knee_server; GET /knee): TPOT grows with the batch and TTFT with the queue,
as the model predicts, so a capacity search over HTTP has a known answer.
"""
from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import threading
import time

import uvloop

from stackbook.harness.knee_scheduler import Knee
from stackbook.harness.knee_server import KneeSender
from stackbook.harness.pacing import Pacing, PacedSender
from stackbook.loadgen import stamped_socket

def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class _Stamped(asyncio.StreamReaderProtocol):
    """Notes when each request's first bytes reach the server, before any parsing: a paced
    stream's truth starts there, however busy the server is with the other streams' requests."""
    arrived: float | None = None          # the first bytes of the request being read
    request_arrived: float | None = None  # those of the request now answered

    def data_received(self, data: bytes) -> None:
        self.received(data, time.perf_counter())

    def received(self, data: bytes, at: float) -> None:
        """Bytes that reached the host at `at` (the kernel's time, on a stamped socket)."""
        if self.arrived is None:
            self.arrived = at
        super().data_received(data)


class CalibrationServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, api_key: str | None = None,
                 slow_headers_s: float = 30.0, pacing: Pacing | None = None, knee: Knee | None = None,
                 prompt_cache: bool = False, rate_limit_every: int | None = None, retry_after: str | None = None):
        if pacing and knee:
            raise ValueError("a calibration server is paced or knee-scheduled, not both")
        if rate_limit_every is not None and rate_limit_every < 1:
            raise ValueError(f"rate_limit_every: {rate_limit_every} names no request; give 1 (every request) or more")
        self.rate_limit_every, self.retry_after = rate_limit_every, retry_after
        self.host, self.port, self.api_key = host, port, api_key
        self.pacing, self.knee = pacing, knee
        self._paced: PacedSender | None = None  # made on the server's own loop
        self._knee: KneeSender | None = None
        self.slow_headers_s = slow_headers_s
        # A provider's prompt cache, as hosted APIs keep one: a prompt sent before is served from
        # it, and the reply's usage says how many of its tokens (prompt_tokens_details.cached_tokens).
        self.prompts_seen: set[str] | None = set() if prompt_cache else None
        self.requests = 0
        self.running = 0
        self.tokens_streamed = 0
        self.arrivals: list[float] = []  # monotonic time each chat request was read, for fidelity checks
        self._server: asyncio.base_events.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # -- HTTP -----------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                method, path, _ = line.decode("latin-1").split(" ", 2)
                headers = {}
                while True:
                    h = await reader.readline()
                    if h in (b"\r\n", b"\n", b""):
                        break
                    k, _, v = h.decode("latin-1").partition(":")
                    headers[k.strip().lower()] = v.strip()
                body = await reader.readexactly(int(headers.get("content-length", 0) or 0))
                proto = writer.transport.get_protocol()
                if isinstance(proto, _Stamped):  # whatever arrives from now on is the next request
                    proto.request_arrived, proto.arrived = proto.arrived, None
                keep = await self._route(method, path, headers, body, writer)
                if not keep:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            return
        finally:
            try:
                writer.close()
            except RuntimeError:
                pass

    @staticmethod
    def _respond(writer, status: int, payload: bytes, ctype: str = "application/json", extra: str = "") -> None:
        reason = {200: "OK", 401: "Unauthorized", 404: "Not Found", 429: "Too Many Requests",
                  503: "Service Unavailable"}.get(status, "OK")
        writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {len(payload)}\r\n"
                     f"{extra}Connection: keep-alive\r\n\r\n".encode() + payload)

    async def _route(self, method: str, path: str, headers: dict, body: bytes, writer) -> bool:
        if self.api_key and headers.get("authorization") != f"Bearer {self.api_key}" and path != "/health":
            self._respond(writer, 401, b'{"error": {"message": "invalid API key", "code": 401}}')
            await writer.drain()
            return True
        if method == "GET" and path == "/health":
            self._respond(writer, 200, b'{"status": "ok"}')
        elif method == "GET" and path == "/arrivals":
            # When each chat request arrived (server clock), then forget them: how well a client
            # kept its schedule, measured on the receiving side, the same way for any client.
            self._respond(writer, 200, json.dumps(self.arrivals).encode())
            self.arrivals = []
        elif method == "GET" and path == "/paced":
            # Each paced stream ended since the last call: its key (the last message), arrival,
            # deadlines and send times (perf_counter seconds), then forget them.
            self._respond(writer, 200, json.dumps(self._paced.take_log() if self._paced else []).encode())
        elif method == "GET" and path == "/knee":
            # The knee mode's truth since the last call: each ended stream's arrival, admission
            # and send times, and each step's end and batch size (perf_counter seconds).
            log = self._knee.take_log() if self._knee else {"streams": [], "steps": []}
            self._respond(writer, 200, json.dumps(log).encode())
        elif method == "GET" and path == "/v1/models":
            self._respond(writer, 200, json.dumps({"object": "list", "data": [
                {"id": "calibration", "object": "model", "max_model_len": 1_000_000}]}).encode())
        elif method == "GET" and path == "/metrics":
            text = (f"# TYPE calibration_requests_total counter\ncalibration_requests_total {self.requests}\n"
                    f"# TYPE calibration:num_requests_running gauge\ncalibration:num_requests_running {self.running}\n"
                    f"# TYPE calibration_generation_tokens_total counter\n"
                    f"calibration_generation_tokens_total {self.tokens_streamed}\n")
            self._respond(writer, 200, text.encode(), "text/plain; version=0.0.4")
        elif method == "POST" and path == "/v1/chat/completions":
            return await self._chat(json.loads(body or b"{}"), writer)
        else:
            self._respond(writer, 404, b'{"error": {"message": "not found"}}')
        await writer.drain()
        return True

    async def _chat(self, req: dict, writer) -> bool:
        arrival = getattr(writer.transport.get_protocol(), "request_arrived", None) or time.perf_counter()
        self.arrivals.append(time.monotonic())
        self.requests += 1
        self.running += 1
        try:
            if self.rate_limit_every and self.requests % self.rate_limit_every == 0:
                self._respond(writer, 429, b'{"error": {"message": "Rate limit reached for requests", '
                              b'"type": "requests", "code": "rate_limit_exceeded"}}',
                              extra=f"Retry-After: {self.retry_after}\r\n" if self.retry_after is not None else "")
                await writer.drain()
                return True
            if (self.pacing or self.knee) and req.get("stream") and str(req.get("model", "")) == "calibration":
                return await self._scheduled_answer(req, writer, arrival)
            return await self._answer(req, writer)
        finally:
            self.running -= 1

    async def _answer(self, req: dict, writer) -> bool:
        mode = str(req.get("model", "")).removeprefix("calibration-") if str(req.get("model", "")).startswith(
            "calibration-") else "ok"
        n = int(req.get("max_tokens") or 16)
        if mode == "http_429":
            self._respond(writer, 429, b'{"error": {"message": "rate limit", "code": "rate_limit_exceeded"}}')
            await writer.drain()
            return True
        if mode == "http_503":
            self._respond(writer, 503, b'{"error": {"message": "overloaded"}}')
            await writer.drain()
            return True
        if mode == "slow_headers":
            await asyncio.sleep(self.slow_headers_s)
        created = int(time.time())
        if not req.get("stream"):
            self.tokens_streamed += n
            self._respond(writer, 200, json.dumps({
                "id": "cal", "object": "chat.completion", "created": created, "model": req.get("model"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "tok " * n},
                             "finish_reason": "length"}],
                "usage": self._usage(req, n)}).encode())
            await writer.drain()
            return True
        # Chunked and kept alive, as the engines' HTTP servers stream.
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                     b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n")
        model = req.get("model")
        token = _chunk(b"data: " + json.dumps(
            {"id": "cal", "object": "chat.completion.chunk", "created": created, "model": model,
             "choices": [{"index": 0, "delta": {"content": "tok "}, "finish_reason": None}]}).encode() + b"\n\n")
        for i in range(n):
            if mode == "truncated" and i == n // 2:
                await writer.drain()
                return False
            if mode == "malformed_sse" and i == n // 2:
                writer.write(_chunk(b"this is not an SSE line\n\ndata: {broken\n\n"))
                await writer.drain()
                return False
            if mode == "invalid_json" and i == n // 2:
                writer.write(_chunk(b'data: {"choices": [{"delta": {"content": "tok "}\n\n'))
                continue
            if mode == "error_event" and i == n // 2:
                writer.write(_chunk(b'data: {"error": {"message": "engine overloaded", "code": 503}}\n\n'))
                await writer.drain()
                return False
            writer.write(token)
            self.tokens_streamed += 1
            await writer.drain()
        tail = [{"id": "cal", "object": "chat.completion.chunk", "created": created, "model": model,
                 "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}]
        if (req.get("stream_options") or {}).get("include_usage"):
            tail.append({"id": "cal", "object": "chat.completion.chunk", "created": created, "model": model,
                         "choices": [], "usage": self._usage(req, n)})
        writer.write(_chunk(b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in tail)
                            + b"data: [DONE]\n\n") + b"0\r\n\r\n")
        await writer.drain()
        return True

    def _usage(self, req: dict, n: int) -> dict:
        """The reply's usage: the prompt counted in words (a stand-in for tokens) and, with a prompt
        cache, how many came from it (all of a prompt sent before, none of a new one)."""
        messages = req.get("messages") or []
        words = max(1, sum(len(str(m.get("content", "")).split()) for m in messages if isinstance(m, dict)))
        out = {"prompt_tokens": words, "completion_tokens": n, "total_tokens": words + n}
        if self.prompts_seen is not None:
            key = json.dumps(messages, sort_keys=True)
            out["prompt_tokens_details"] = {"cached_tokens": words if key in self.prompts_seen else 0}
            self.prompts_seen.add(key)
        return out

    @functools.lru_cache(maxsize=4)
    def _token_chunk(self, created: int, model: str) -> bytes:
        """One streamed token, built once a second (its `created`), not once per stream."""
        return _chunk(b"data: " + json.dumps(
            {"id": "cal", "object": "chat.completion.chunk", "created": created, "model": model,
             "choices": [{"index": 0, "delta": {"content": "tok "}, "finish_reason": None}]}).encode() + b"\n\n")

    async def _scheduled_answer(self, req: dict, writer, arrival: float) -> bool:
        """A stream whose events go out when the pacing's deadlines or the knee scheduler's steps
        say; the last one carries the end."""
        if self.knee:
            sender = self._knee = self._knee or KneeSender(self.knee)
        else:
            sender = self._paced = self._paced or PacedSender(self.pacing)
        n = max(1, int(req.get("max_tokens") or req.get("max_completion_tokens") or 16))
        created, model = int(time.time()), req.get("model")
        token = self._token_chunk(created, model)
        tail = [{"id": "cal", "object": "chat.completion.chunk", "created": created, "model": model,
                 "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}]
        if (req.get("stream_options") or {}).get("include_usage"):
            tail.append({"id": "cal", "object": "chat.completion.chunk", "created": created, "model": model,
                         "choices": [], "usage": self._usage(req, n)})
        end = _chunk(b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in tail) + b"data: [DONE]\n\n")
        events = [token] * (n - 1) + [token + end + b"0\r\n\r\n"]
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                     b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n")
        messages = req.get("messages") or [{}]
        key = str(messages[-1].get("content", "") if isinstance(messages[-1], dict) else "")[:200]
        stream = sender.stream(key, arrival, events, writer.transport)
        ok = await stream.done
        self.tokens_streamed += len(stream.sent)
        await writer.drain()
        return ok

    async def _listen(self) -> None:
        def protocol():
            return _Stamped(asyncio.StreamReader(limit=2**16), self._handle)
        if (self.pacing or self.knee) and stamped_socket.AVAILABLE:
            # Paced or knee: each request's arrival is the kernel's receive time of its first bytes.
            self._server = stamped_socket.StampedListener(self.host, self.port, protocol)
        else:
            self._server = await asyncio.get_running_loop().create_server(protocol, self.host, self.port, backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]

    # -- lifecycle --------------------------------------------------------------------------
    async def serve(self) -> None:
        await self._listen()
        async with self._server:
            await self._server.serve_forever()

    def start_in_thread(self) -> "CalibrationServer":
        """Run in a background thread (tests, selftest); returns once the port is bound."""
        ready = threading.Event()

        def run():
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)

            async def main():
                await self._listen()
                ready.set()
                await self._server.serve_forever()
            try:
                self._loop.run_until_complete(main())
            except asyncio.CancelledError:
                pending = [t for t in asyncio.all_tasks(self._loop) if not t.done()]
                if pending:
                    self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        """Close the listener and cancel open connections, then let the thread end."""
        if self._loop and self._server:
            def shutdown():
                self._server.close()
                for task in asyncio.all_tasks(self._loop):
                    task.cancel()
            self._loop.call_soon_threadsafe(shutdown)
        if self._thread:
            self._thread.join(2)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--api-key-env", default=None, help="require this variable's value as a bearer key")
    ap.add_argument("--ttft-ms", type=float, default=None, help="paced mode: each stream's time to first token")
    ap.add_argument("--gap-ms", type=float, default=10.0, help="paced mode: the gap between a stream's tokens")
    ap.add_argument("--jitter", default="none", choices=["none", "uniform", "normal", "exponential"])
    ap.add_argument("--jitter-ms", type=float, default=0.0)
    ap.add_argument("--knee", default=None, metavar="B,T0_MS,T1_MS",
                    help="knee mode: at most B sequences per step, a step over b of them takes T0 + T1*b ms")
    ap.add_argument("--cpu", type=int, default=None, help="pin the server to this CPU core")
    ap.add_argument("--rate-limit-every", type=int, default=None, metavar="N",
                    help="answer every Nth chat request with 429 Too Many Requests")
    ap.add_argument("--retry-after", default=None, help="with --rate-limit-every: the Retry-After header's value")
    a = ap.parse_args()
    key = os.environ.get(a.api_key_env) if a.api_key_env else None
    if a.cpu is not None:
        os.sched_setaffinity(0, {a.cpu})
    pacing = None if a.ttft_ms is None else Pacing(ttft_ms=a.ttft_ms, gap_ms=a.gap_ms, jitter=a.jitter,
                                                    jitter_ms=a.jitter_ms)
    try:
        knee = None if a.knee is None else Knee.parse(a.knee)
    except ValueError as err:
        ap.error(str(err))
    server = CalibrationServer(a.host, a.port, key, pacing=pacing, knee=knee,
                               rate_limit_every=a.rate_limit_every, retry_after=a.retry_after)
    print(f"calibration server on {a.host}:{a.port or '(free port)'}", flush=True)
    uvloop.run(server.serve())


if __name__ == "__main__":
    main()
