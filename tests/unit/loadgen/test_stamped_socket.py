"""Kernel receive times: a read is stamped with when its bytes reached the host, not with when
the event loop got round to reading them."""
import asyncio
import socket
import struct
import time

import pytest

from stackbook.loadgen import stamped_socket
from stackbook.loadgen.stamped_socket import SO_TIMESTAMPNS, kernel_stamp, open_stamped

pytestmark = pytest.mark.skipif(not stamped_socket.AVAILABLE, reason="SO_TIMESTAMPNS is Linux's")


def test_a_timespec_is_moved_onto_the_perf_counter_clock_and_never_after_the_read():
    offset = time.time() - time.perf_counter()
    real = time.time() - 0.25
    raw = struct.pack("qq", int(real), int((real % 1) * 1e9))
    now = time.perf_counter()
    assert kernel_stamp([(socket.SOL_SOCKET, SO_TIMESTAMPNS, raw)], now) == pytest.approx(real - offset, abs=1e-3)
    future = time.time() + 5
    raw = struct.pack("qq", int(future), 0)
    assert kernel_stamp([(socket.SOL_SOCKET, SO_TIMESTAMPNS, raw)], now) == now
    assert kernel_stamp([], now) == now  # no stamp: the read's own time


class Reader:
    def __init__(self):
        self.reads, self.lost = [], asyncio.Event()

    def connection_made(self, transport):
        self.transport = transport

    def received(self, data, at):
        self.reads.append((data, at))

    def connection_lost(self, exc):
        self.lost.set()


def test_bytes_read_late_keep_the_time_they_arrived():
    async def main():
        peer_ready: asyncio.Future = asyncio.get_running_loop().create_future()

        async def serve(reader, writer):
            peer_ready.set_result(writer)
            await reader.read()  # until the client closes

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        addresses = await asyncio.get_running_loop().getaddrinfo(
            "127.0.0.1", server.sockets[0].getsockname()[1], type=socket.SOCK_STREAM)
        proto = await open_stamped(addresses, Reader)
        writer = await peer_ready
        # The kernel turns receive stamping on a moment after the first socket asks for it (until
        # then a read carries no stamp and keeps its own time).
        await asyncio.sleep(0.2)
        writer.write(b"first")
        await writer.drain()
        sent = time.perf_counter()
        time.sleep(0.1)  # the loop is held: the bytes wait in the socket
        for _ in range(100):
            if proto.reads:
                break
            await asyncio.sleep(0.01)
        read_at = time.perf_counter()
        proto.transport.close()
        await asyncio.wait_for(proto.lost.wait(), 5)
        server.close()
        return proto.reads, sent, read_at

    reads, sent, read_at = asyncio.run(main())
    assert reads[0][0] == b"first"
    assert abs(reads[0][1] - sent) < 0.02 and read_at - reads[0][1] > 0.09
