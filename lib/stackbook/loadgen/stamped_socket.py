"""Plain-TCP connections whose reads carry the kernel's arrival time of their bytes.

A client that stamps a chunk when its event loop gets to it adds its own delay to every TTFT and
inter-token gap: at hundreds of streams, the wait for the loop (other streams' chunks, the
records being built) and for a core (a busy host) is milliseconds. Here each socket is read with
`recvmsg` and SO_TIMESTAMPNS, so a read comes with the time the kernel received its last
segment, however late the loop reads it; that time is moved onto the `time.perf_counter()`
clock the rest of the client uses. Linux only, and not under TLS (the transport's own reading
is used there, stamped on arrival in the loop). The kernel turns stamping on a moment after the
first socket asks for it; a read without a stamp keeps the time the loop read it.
"""
from __future__ import annotations

import asyncio
import socket
import struct
import sys
import time

# SO_TIMESTAMPNS: the receive time of a read as a timespec in the ancillary data (CLOCK_REALTIME).
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
AVAILABLE = sys.platform.startswith("linux")
READ_SIZE = 1 << 18
ANCILLARY_SIZE = socket.CMSG_SPACE(16) if hasattr(socket, "CMSG_SPACE") else 64


def kernel_stamp(ancillary: list, now: float) -> float:
    """The read's kernel receive time on the perf_counter clock (never after `now`, the read
    itself), or `now` where the read carries none."""
    for level, kind, raw in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= 16:
            sec, nsec = struct.unpack_from("qq", raw)
            return min(now, sec + nsec * 1e-9 - (time.time() - time.perf_counter()))
    return now


class StampedTransport:
    """What the HTTP client needs of a transport (write, close, is_closing, get_extra_info) over
    a socket it reads itself; each read goes to `protocol.received(data, kernel time)`."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, protocol):
        self._loop, self._sock, self._protocol = loop, sock, protocol
        self._fd = sock.fileno()
        self._closing = False
        self._pending = bytearray()  # what the socket could not take at once
        protocol.connection_made(self)
        loop.add_reader(self._fd, self._readable)

    def _readable(self) -> None:
        try:
            data, ancillary, _, _ = self._sock.recvmsg(READ_SIZE, ANCILLARY_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as err:
            self._lost(err)
            return
        if not data:
            self._lost(None)
            return
        self._protocol.received(data, kernel_stamp(ancillary, time.perf_counter()))

    def write(self, data: bytes) -> None:
        if self._closing:
            raise RuntimeError("the connection is closed")
        if self._pending:
            self._pending += data
            return
        try:
            n = self._sock.send(data)
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError as err:
            self._lost(err)
            raise
        if n < len(data):
            self._pending += data[n:]
            self._loop.add_writer(self._fd, self._writable)

    def _writable(self) -> None:
        try:
            n = self._sock.send(self._pending)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as err:
            self._lost(err)
            return
        del self._pending[:n]
        if not self._pending:
            self._loop.remove_writer(self._fd)

    def is_closing(self) -> bool:
        return self._closing

    def pause_reading(self) -> None:  # a reader's flow control: reads are small here, never paused
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        self._lost(None)

    def get_protocol(self):
        return self._protocol

    def get_extra_info(self, name: str, default=None):
        return self._sock if name == "socket" else default

    def _lost(self, exc: Exception | None) -> None:
        if self._closing:
            return
        self._closing = True
        self._loop.remove_reader(self._fd)
        if self._pending:
            self._loop.remove_writer(self._fd)
        self._sock.close()
        self._loop.call_soon(self._protocol.connection_lost, exc)


async def open_stamped(addresses: list[tuple], protocol_factory):
    """Connect to the first of `addresses` (getaddrinfo rows) that answers; the protocol is
    returned with its StampedTransport made. The last connection error is raised if none does."""
    loop = asyncio.get_running_loop()
    error: OSError = OSError("no address to connect to")
    for family, kind, proto, _, address in addresses:
        sock = socket.socket(family, kind, proto)
        sock.setblocking(False)
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await loop.sock_connect(sock, address)
        except OSError as err:
            sock.close()
            error = err
            continue
        except BaseException:
            sock.close()
            raise
        protocol = protocol_factory()
        StampedTransport(loop, sock, protocol)
        return protocol
    raise error


class StampedListener:
    """A listening socket whose connections are StampedTransports, with the part of
    asyncio.Server's interface a server uses (sockets, close, serve_forever, async with)."""

    def __init__(self, host: str, port: int, protocol_factory, backlog: int = 1024):
        self._loop = asyncio.get_running_loop()
        self._sock = socket.create_server((host, port), backlog=backlog)
        self._sock.setblocking(False)
        self.sockets = [self._sock]
        self._factory = protocol_factory
        self._closed = self._loop.create_future()
        self._loop.add_reader(self._sock.fileno(), self._accept)

    def _accept(self) -> None:
        for _ in range(64):
            try:
                sock, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            sock.setblocking(False)
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            StampedTransport(self._loop, sock, self._factory())

    def close(self) -> None:
        if self._closed.done():
            return
        self._loop.remove_reader(self._sock.fileno())
        self._sock.close()
        self._closed.set_result(None)

    async def serve_forever(self) -> None:
        await self._closed

    async def __aenter__(self) -> "StampedListener":
        return self

    async def __aexit__(self, *exc) -> None:
        self.close()
