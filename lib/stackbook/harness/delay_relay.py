"""A relay that adds a known cost to a real engine's streams: the instrument behind the verdict's
known-effect control, as the calibration server is the harness's.

Every reply passes through byte for byte. In a streamed reply, the k-th token event after the
first is held until k x `tpot_ms` after it arrived, so every gap between token events grows by
exactly tpot_ms: the arm's TPOT is its engine's plus tpot_ms, its TTFT and its answers are its
engine's. A difference the decision rule must find, known by construction. Every other route
(health, metrics, cache flushes, slots) is relayed unchanged. It binds 127.0.0.1.

The runner starts it as a process of its own (RelayProcess), so no other work in the runner can
hold an event past its release; how late each held event still left is measured and kept with
the relay's record (GET /_stackbook_relay), the evidence that the cost added is the cost stated.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import threading
import time
from urllib.parse import urlsplit

import httpx

import orjson
import uvloop

HOP_BY_HOP = ("connection", "keep-alive", "proxy-connection", "transfer-encoding", "content-length", "te", "trailer",
              "upgrade")


def is_token_event(data: bytes) -> bool:
    """Whether a chunk of an SSE stream carries generated text (a delta with content)."""
    for line in data.split(b"\n"):
        if not line.startswith(b"data:") or line[5:].strip() in (b"", b"[DONE]"):
            continue
        try:
            event = orjson.loads(line[5:])
        except orjson.JSONDecodeError:
            continue
        for choice in event.get("choices") or ():
            delta = choice.get("delta") or {}
            if delta.get("content") or delta.get("reasoning_content"):
                return True
    return False


async def _read_head(reader: asyncio.StreamReader) -> tuple[str, list[tuple[str, str]]] | None:
    line = await reader.readline()
    if not line:
        return None
    headers = []
    while True:
        h = await reader.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        k, _, v = h.decode("latin-1").partition(":")
        headers.append((k.strip(), v.strip()))
    return line.decode("latin-1").rstrip("\r\n"), headers


def _get(headers: list[tuple[str, str]], name: str) -> str | None:
    return next((v for k, v in headers if k.lower() == name), None)


class DelayRelay:
    """Relays 127.0.0.1:<port> to `upstream` (http://host:port), delaying token events."""

    def __init__(self, upstream: str, tpot_ms: float, host: str = "127.0.0.1", port: int = 0):
        u = urlsplit(upstream)
        if u.scheme != "http" or not u.hostname or not u.port:
            raise ValueError(f"the relay's upstream must be http://host:port, got {upstream!r}")
        self.upstream_host, self.upstream_port = u.hostname, u.port
        self.delay_s = tpot_ms / 1000
        self.host, self.port = host, port
        self.streams = 0
        self.held_events = 0
        self.late_s_total = 0.0   # how late held events left, past their release time
        self.late_s_max = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> "DelayRelay":
        ready = threading.Event()

        def serve() -> None:
            self._loop = self.listen()
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, name="delay-relay", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the delay relay did not start listening within 10 s")
        return self

    def listen(self) -> asyncio.AbstractEventLoop:
        """Bind (the port, when 0, is the system's choice) on a new event loop, returned unstarted."""
        loop = uvloop.new_event_loop()
        asyncio.set_event_loop(loop)
        self._server = loop.run_until_complete(asyncio.start_server(self._handle, self.host, self.port))
        self.port = self._server.sockets[0].getsockname()[1]
        return loop

    def stop(self) -> None:
        if self._loop is None:
            return
        loop, server = self._loop, self._server

        async def close() -> None:
            server.close()

        asyncio.run_coroutine_threadsafe(close(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(5)
        self._loop = None

    def record(self) -> dict:
        """What the passport says about the relay: the effect it adds, what it held, and how late
        held events left (a late last event lengthens that request's TPOT by lateness / gaps)."""
        n = self.held_events
        return {"added_tpot_ms": round(self.delay_s * 1000, 3), "listens": self.url,
                "upstream": f"http://{self.upstream_host}:{self.upstream_port}", "streams": self.streams,
                "held_token_events": n,
                "release_late_ms": {"mean": round(1000 * self.late_s_total / n, 3) if n else None,
                                    "max": round(1000 * self.late_s_max, 3)}}

    # -- relaying -------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await _read_head(reader)
                if head is None:
                    return
                request_line, headers = head
                if _get(headers, "transfer-encoding"):
                    writer.write(b"HTTP/1.1 411 Length Required\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    return
                body = await reader.readexactly(int(_get(headers, "content-length") or 0))
                if request_line.startswith("GET /_stackbook_relay "):
                    payload = json.dumps(self.record()).encode()
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                                 % (len(payload), payload))
                    await writer.drain()
                    continue
                if not await self._relay(request_line, headers, body, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            return
        finally:
            try:
                writer.close()
            except RuntimeError:
                pass

    async def _relay(self, request_line: str, headers: list, body: bytes, writer: asyncio.StreamWriter) -> bool:
        """One request to the upstream and its reply back; False when the client's connection must close."""
        up_reader, up_writer = await asyncio.open_connection(self.upstream_host, self.upstream_port)
        try:
            kept = [(k, v) for k, v in headers if k.lower() not in HOP_BY_HOP]
            up_writer.write((f"{request_line}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in kept)
                             + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode("latin-1") + body)
            await up_writer.drain()
            head = await _read_head(up_reader)
            if head is None:
                raise ConnectionError("the upstream closed without a reply")
            status_line, up_headers = head
            status = int(status_line.split(" ", 2)[1])
            out = [(k, v) for k, v in up_headers if k.lower() not in HOP_BY_HOP]
            chunked = (_get(up_headers, "transfer-encoding") or "").lower() == "chunked"
            length = _get(up_headers, "content-length")
            no_body = request_line.startswith("HEAD ") or status in (204, 304) or status < 200
            keep = no_body or chunked or length is not None
            framing = ("Transfer-Encoding: chunked\r\n" if chunked else
                       f"Content-Length: {length}\r\n" if length is not None else "")
            writer.write((f"{status_line}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in out) + framing
                          + f"Connection: {'keep-alive' if keep else 'close'}\r\n\r\n").encode("latin-1"))
            if no_body:
                pass
            elif chunked:
                await self._relay_chunks(up_reader, writer)
            elif length is not None:
                writer.write(await up_reader.readexactly(int(length)))
            else:
                writer.write(await up_reader.read())
            await writer.drain()
            return keep
        finally:
            up_writer.close()

    async def _relay_chunks(self, up_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A chunked body: chunks are stamped as they arrive and sent on at their release time,
        so a held event never delays the reading of the next."""
        queue: asyncio.Queue = asyncio.Queue()

        async def read() -> None:
            try:
                while True:
                    size = int((await up_reader.readline()).split(b";", 1)[0].strip() or b"0", 16)
                    data = await up_reader.readexactly(size) if size else b""
                    await up_reader.readline()  # the CRLF after the chunk (or the last, empty, trailer line)
                    queue.put_nowait((time.perf_counter(), data))
                    if not size:
                        return
            except (ConnectionError, asyncio.IncompleteReadError, ValueError):
                queue.put_nowait((time.perf_counter(), None))

        reader_task = asyncio.ensure_future(read())
        self.streams += 1
        tokens = 0
        try:
            while True:
                arrived, data = await queue.get()
                if data is None:
                    raise ConnectionError("the upstream's stream was cut")
                if data and is_token_event(data):
                    if tokens:
                        self.held_events += 1
                        release = arrived + tokens * self.delay_s
                        while (wait := release - time.perf_counter()) > 0:  # a timer may fire a little early
                            await asyncio.sleep(wait)
                        late = time.perf_counter() - release
                        self.late_s_total += late
                        self.late_s_max = max(self.late_s_max, late)
                    tokens += 1
                writer.write(b"%x\r\n%s\r\n" % (len(data), data))
                await writer.drain()
                if not data:
                    return
        finally:
            reader_task.cancel()


class RelayProcess:
    """The relay as a process of its own, for the runner: started in front of `upstream`, its
    record read over HTTP, stopped by its process id."""

    def __init__(self, upstream: str, tpot_ms: float):
        self.upstream, self.tpot_ms = upstream, tpot_ms
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def start(self) -> "RelayProcess":
        self.proc = subprocess.Popen([sys.executable, "-m", "stackbook.harness.delay_relay", "--upstream",
                                      self.upstream,
                                      "--tpot-ms", str(self.tpot_ms)], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()  # "listening http://127.0.0.1:PORT", or nothing if it failed
        if not line.startswith("listening "):
            self.stop()
            raise RuntimeError(f"the delay relay in front of {self.upstream} did not start")
        self.url = line.removeprefix("listening ")
        return self

    def record(self) -> dict:
        try:
            return httpx.get(self.url + "/_stackbook_relay", timeout=10).json()
        except (httpx.HTTPError, ValueError) as err:
            return {"added_tpot_ms": self.tpot_ms, "record": f"not read: {err}"}

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description="relay an engine's streams, adding a known cost to every token gap")
    ap.add_argument("--upstream", required=True, help="http://host:port of the engine")
    ap.add_argument("--tpot-ms", type=float, required=True)
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args()
    relay = DelayRelay(a.upstream, a.tpot_ms, port=a.port)
    loop = relay.listen()
    print(f"listening {relay.url}", flush=True)
    try:
        loop.run_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
