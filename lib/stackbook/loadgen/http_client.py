"""A lean HTTP/1.1 client for streamed responses, built for the load generator.

General-purpose clients spend hundreds of microseconds of Python per request; at a few hundred
requests per second that time becomes schedule lag and inflated latencies that belong to the
client, not the engine. This one parses with llhttp (through httptools), keeps connections
alive, and does nothing per received segment except stamp its arrival time and keep the bytes:
server-sent events are split into (arrival time, payload) pairs and decoded after the reply ends.
A request's clock starts when it goes onto the wire (its connection's set-up, or the write on a
kept-alive one) and stops at the arrival of its last bytes, never at a later turn of the loop.
"""
from __future__ import annotations

import asyncio
import json
import socket
import ssl
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httptools

from stackbook import __version__
from stackbook.loadgen import stamped_socket

USER_AGENT = f"stackbook/{__version__}"
# Sent on every request: who is asking, and no compression (a compressed stream would be
# buffered by the server and decoded here, which shifts every chunk's arrival time).
STANDARD_HEADERS = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}


class ProxyRefused(ValueError):
    """A proxy is configured for the target host; the load generator connects directly only."""


def refuse_proxy(base_url: str) -> None:
    """The load generator connects straight to the server (a proxy would add its own latency to
    every measured chunk), so a proxy set for this host in HTTPS_PROXY/HTTP_PROXY/ALL_PROXY and not
    excluded by NO_PROXY is refused, naming the fix, rather than silently bypassed."""
    u = urlsplit(base_url)
    if u.hostname in ("localhost", "::1", "0.0.0.0") or (u.hostname or "").startswith("127."):
        return  # loopback: no proxy can reach it
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(u.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass_environment(u.hostname or "", proxies):
        return
    raise ProxyRefused(
        f"a proxy ({proxy}) is set for {u.hostname} through the {u.scheme.upper()}_PROXY/ALL_PROXY environment, and "
        f"the load generator connects directly so that no proxy's latency enters the measurements; add "
        f"{u.hostname} to NO_PROXY (e.g. NO_PROXY={u.hostname}) if it is reachable directly, or unset the proxy "
        "variables for this run")


def tls_context(ca_bundle: str | None = None) -> ssl.SSLContext:
    """The system's trust store, or only the CA bundle named (a private or self-signed CA)."""
    if ca_bundle is not None and not Path(ca_bundle).is_file():
        raise FileNotFoundError(f"ca_bundle {ca_bundle!r} is not a file; give the PEM file of the CA that signed "
                                "the server's certificate")
    return ssl.create_default_context(cafile=ca_bundle)


def kernel_stamped(base_url: str) -> bool:
    """Whether replies from this server are stamped with the kernel's receive times (plain TCP
    on Linux, loadgen.stamped_socket) rather than when the loop reads them."""
    return urlsplit(base_url).scheme == "http" and stamped_socket.AVAILABLE


def host_header(host: str, port: int) -> str:
    """host:port as the Host header and URLs write it: an IPv6 literal in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass
class StreamedReply:
    """What came back for one request. `events` holds each SSE `data:` payload with the
    perf_counter time at which the bytes carrying its end arrived; they are split out of the
    body's timed `segments` when first read, after the reply has ended."""
    status: int | None = None
    segments: list[tuple[float, bytes]] = field(default_factory=list)
    body: bytes = b""
    error_class: str = "none"
    error: str | None = None
    complete: bool = False
    connect_s: float | None = None  # opening the connection (TCP, TLS) for this request; None when reused
    sent_at: float | None = None  # perf_counter when the request went onto the wire (its connect, or its write)
    ended_at: float | None = None  # perf_counter when its last bytes arrived (or it failed)

    _events: list[tuple[float, bytes]] | None = field(default=None, repr=False)

    @property
    def events(self) -> list[tuple[float, bytes]]:
        if self._events is None:
            self._events = sse_events(self.segments)
        return self._events

    @events.setter
    def events(self, value: list[tuple[float, bytes]]) -> None:
        self._events = value

    @property
    def engine_timings(self) -> dict | None:
        """The engine's own timings of this request, where its stream carries them (llama-server
        puts `timings` in its final chunk). Read after the reply has ended, off the receiving path."""
        return final_chunk_timings(self.events)


def final_chunk_timings(events: list[tuple[float, bytes]]) -> dict | None:
    """The `timings` object of the last stream chunk that has one (llama-server: prompt_n,
    prompt_ms, predicted_n, predicted_ms, ...), else None. Only the last few chunks are looked at,
    and only one is parsed as JSON: the cost is per request, never per chunk."""
    for _, data in reversed(events[-3:]):
        if b'"timings"' not in data:
            continue
        try:
            timings = json.loads(data).get("timings")
        except (ValueError, AttributeError):
            return None
        return timings if isinstance(timings, dict) else None
    return None


class _Exchange:
    """One request in flight on one connection. Body segments are kept with their arrival time
    as they come (one append each); the SSE lines are split out once the reply has ended."""
    __slots__ = ("reply", "future", "segments", "event_stream", "got_bytes", "body_parts")

    def __init__(self, future: asyncio.Future):
        self.reply = StreamedReply()
        self.future = future
        self.segments: list[tuple[float, bytes]] = []
        self.event_stream = True
        self.got_bytes = False
        self.body_parts: list[bytes] = []

    def finish(self, error_class: str = "none", error: str | None = None, at: float | None = None) -> None:
        if self.future.done():
            return
        r = self.reply
        r.ended_at = at if at is not None else time.perf_counter()
        r.segments = self.segments
        r.body = b"".join(self.body_parts)
        if error_class != "none":
            r.error_class, r.error = error_class, error
        self.future.set_result(r)


def sse_events(segments: list[tuple[float, bytes]]) -> list[tuple[float, bytes]]:
    """Each `data:` payload of a stream with the arrival time of the segment that carried its
    line's end (a line still open at the end of the stream counts as ended by it)."""
    events: list[tuple[float, bytes]] = []
    partial = b""
    for at, data in segments:
        # The common segment is one whole event, `data: {...}\n\n`: no split needed.
        if not partial and data[-2:] == b"\n\n" and data[:6] == b"data: " and data.count(b"\n") == 2:
            events.append((at, data[6:-2]))
            continue
        *lines, partial = (partial + data).split(b"\n")
        for line in lines:
            if line.startswith(b"data:"):
                events.append((at, line[5:].strip()))
    if partial.startswith(b"data:"):
        events.append((segments[-1][0], partial[5:].strip()))
    return events


class _Connection(asyncio.Protocol):
    def __init__(self, pool: "StreamClient"):
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.exchange: _Exchange | None = None
        self.now = 0.0
        self.closed = False
        self.reused = False
        self.headers_done = False
        self._framed = False
        self._ctype = b""

    # -- transport callbacks
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.received(data, time.perf_counter())

    def received(self, data: bytes, at: float) -> None:
        """Bytes that reached this host at `at` (the kernel's time where the socket gives it)."""
        self.now = at
        ex = self.exchange
        if ex is None:
            return
        ex.got_bytes = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail("malformed_stream", "the server switched protocols")
        except httptools.HttpParserError as err:
            self._fail("malformed_stream", f"invalid HTTP from the server: {err}")

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.pool._all.discard(self)
        ex, self.exchange = self.exchange, None
        if ex is None or ex.future.done():
            return
        if self.headers_done and self.parser.get_status_code() and not self._framed:
            ex.finish()  # a body that runs until the connection closes has ended
        elif not ex.got_bytes and self.reused:
            ex.finish("retry", "a kept-alive connection was closed by the server before it answered")
        else:
            ex.finish("transport", f"connection closed before the reply ended ({exc or 'closed by the server'})")

    # -- parser callbacks
    def on_message_begin(self) -> None:
        self.headers_done = False
        self._framed = False
        self._ctype = b""

    def on_header(self, name: bytes, value: bytes) -> None:
        n = name.lower()
        if n in (b"content-length", b"transfer-encoding"):
            self._framed = True
        elif n == b"content-type":
            self._ctype = value

    def on_headers_complete(self) -> None:
        self.headers_done = True
        ex = self.exchange
        ex.reply.status = self.parser.get_status_code()
        ex.event_stream = ex.reply.status == 200 and b"event-stream" in self._ctype

    def on_body(self, body: bytes) -> None:
        ex = self.exchange
        if ex.event_stream:
            ex.segments.append((self.now, body))
        else:
            ex.body_parts.append(body)

    def on_message_complete(self) -> None:
        ex, self.exchange = self.exchange, None
        ex.reply.complete = True
        ex.finish(at=self.now)
        if self.parser.should_keep_alive() and not self.closed:
            self.pool._release(self)
        else:
            self.transport.close()

    def _fail(self, error_class: str, error: str) -> None:
        ex, self.exchange = self.exchange, None
        if ex:
            ex.finish(error_class, error)
        self.closed = True
        self.transport.close()

    def send(self, payload: bytes, ex: _Exchange) -> None:
        self.exchange = ex
        self.headers_done = False
        self._framed = False
        if ex.reply.sent_at is None:
            ex.reply.sent_at = time.perf_counter()
        self.transport.write(payload)


class StreamClient:
    """Keep-alive connections to one server; `post` sends a request and returns its reply once
    the reply has ended, failed or timed out (never raises for what a server does)."""

    def __init__(self, base_url: str, headers: dict | None = None, ca_bundle: str | None = None):
        u = urlsplit(base_url)
        if u.scheme not in ("http", "https"):
            raise ValueError(f"base URL {base_url!r} must start with http:// or https://")
        refuse_proxy(base_url)
        self.tls = tls_context(ca_bundle) if u.scheme == "https" else None
        self.host, self.port = u.hostname, u.port or (443 if self.tls else 80)
        self.prefix = u.path.rstrip("/")
        extra = "".join(f"{k}: {v}\r\n" for k, v in {**STANDARD_HEADERS, **(headers or {})}.items())
        self._head = (f"Host: {host_header(self.host, self.port)}\r\nContent-Type: application/json\r\n"
                      f"Accept: text/event-stream\r\n{extra}")
        self._idle: list[_Connection] = []
        self._all: set[_Connection] = set()
        self._addresses: list | None = None  # the server's addresses, resolved once

    def _release(self, conn: _Connection) -> None:
        conn.reused = True
        self._idle.append(conn)

    def _idle_connection(self) -> _Connection | None:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and not conn.transport.is_closing():
                return conn
        return None

    async def _new_connection(self) -> _Connection:
        loop = asyncio.get_running_loop()
        if self.tls is None and stamped_socket.AVAILABLE:
            # Read by the client itself, each read stamped with the kernel's arrival time.
            if self._addresses is None:
                self._addresses = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
            conn = await stamped_socket.open_stamped(self._addresses, lambda: _Connection(self))
        else:
            _, conn = await loop.create_connection(lambda: _Connection(self), self.host, self.port, ssl=self.tls)
        self._all.add(conn)
        return conn

    async def preopen(self, n: int, timeout_s: float = 30.0) -> None:
        """Open up to n kept-alive connections before a point's clock starts, so that its first
        requests do not all open theirs at once (a storm of the client's own making)."""
        missing = n - len(self._idle)
        if missing <= 0:
            return
        opened = await asyncio.wait_for(asyncio.gather(*(self._new_connection() for _ in range(missing)),
                                                       return_exceptions=True), timeout_s)
        for conn in opened:
            if isinstance(conn, _Connection):
                self._release(conn)

    async def post(self, path: str, body: bytes, timeout_s: float, headers: dict | None = None) -> StreamedReply:
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        payload = (f"POST {self.prefix}{path} HTTP/1.1\r\n{self._head}{extra}Content-Length: {len(body)}\r\n\r\n"
                   .encode("latin-1") + body)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        for _ in range(3):
            fut = loop.create_future()
            ex = _Exchange(fut)
            # A kept-alive connection is used at once: no turn of the loop between the decision
            # to send and the write (at hundreds of streams, each turn is other streams' work).
            conn = self._idle_connection()
            if conn is None:
                began = ex.reply.sent_at = time.perf_counter()
                try:
                    conn = await asyncio.wait_for(self._new_connection(), max(0.0, deadline - loop.time()))
                except asyncio.TimeoutError:
                    ex.finish("timeout", f"no connection within {timeout_s:g} s")
                    return fut.result()
                except ssl.SSLCertVerificationError as err:
                    ex.finish("transport", f"TLS: the server's certificate was not verified ({err.verify_message}); "
                                           "if it is signed by a private CA, give that "
                                           "CA's PEM file as engine.ca_bundle")
                    return fut.result()
                except OSError as err:
                    ex.finish("transport", f"{type(err).__name__}: {err}")
                    return fut.result()
                ex.reply.connect_s = time.perf_counter() - began
            try:
                conn.send(payload, ex)
            except (RuntimeError, OSError):
                # A kept-alive connection the server has closed, not yet noticed: nothing was
                # sent, so try again on another connection.
                conn.closed = True
                conn.exchange = None
                self._all.discard(conn)
                reply = StreamedReply(error_class="retry", error="the kept-alive connection was closed")
                continue
            timer = loop.call_at(deadline, self._expire, conn, ex, timeout_s)
            try:
                reply = await fut
            finally:
                timer.cancel()
            if reply.error_class != "retry":
                return reply
        reply.error_class = "transport"
        reply.error = f"no usable connection after three tries ({reply.error})"
        return reply

    @staticmethod
    def _expire(conn: _Connection, ex: _Exchange, timeout_s: float) -> None:
        if not ex.future.done():
            ex.finish("timeout", f"no complete reply after {timeout_s:g} s")
            conn.exchange = None
            conn.closed = True
            conn.transport.close()

    def close(self) -> None:
        for conn in self._all:
            if conn.transport and not conn.transport.is_closing():
                conn.transport.close()
        self._idle.clear()
        self._all.clear()

    async def __aenter__(self) -> "StreamClient":
        return self

    async def __aexit__(self, *exc) -> None:
        self.close()
