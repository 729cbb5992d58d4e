"""The streaming HTTP client on its own, against small raw servers that each do one awkward
thing real servers do: close a kept-alive connection, split events across segments, or send a
body that runs until the connection closes."""
import asyncio

import pytest
from stackbook.loadgen.drivers import run_sync
from stackbook.loadgen.http_client import StreamClient


async def serve(handler):
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


async def one_reply(handler):
    server, url = await serve(handler)
    async with StreamClient(url) as client:
        reply = await client.post("/x", b"{}", 5)
    server.close()
    return reply


async def read_request(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    length = int([h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")][0])
    return head, await reader.readexactly(length)


def test_a_closed_keep_alive_connection_is_replaced():
    """The server says keep-alive, then closes the connection once the reply is sent: the next
    request must go out on a fresh connection, not fail."""
    connections = []

    async def handler(reader, writer):
        connections.append(1)
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
                     b"Connection: keep-alive\r\n\r\n{}")
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.close()

    async def main():
        server, url = await serve(handler)
        async with StreamClient(url) as client:
            replies = []
            for _ in range(3):
                replies.append(await client.post("/x", b"{}", 5))
                await asyncio.sleep(0.2)  # the server has closed the idle connection by now
        server.close()
        return replies

    replies = run_sync(main())
    assert [r.status for r in replies] == [200, 200, 200]
    assert all(r.error_class == "none" and r.body == b"{}" for r in replies)
    assert len(connections) == 3


def test_events_split_across_segments_are_reassembled_and_timed():
    async def handler(reader, writer):
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        for piece in (b'data: {"a"', b': 1}\n\ndata: {"a": 2}\n', b"\ndata: [DONE]\n\n"):
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            await asyncio.sleep(0.05)
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    reply = run_sync(one_reply(handler))
    assert reply.complete and reply.error_class == "none"
    assert [data for _, data in reply.events] == [b'{"a": 1}', b'{"a": 2}', b"[DONE]"]
    times = [t for t, _ in reply.events]
    # the first event is complete only when its second half arrives, ~50 ms after the first
    assert times[1] - times[0] == pytest.approx(0, abs=0.01) and times[2] - times[1] > 0.03


def test_a_body_until_close_ends_the_reply_and_a_cut_chunked_one_is_an_error():
    async def until_close(reader, writer):
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                     b"data: {\"a\": 1}\n\ndata: [DONE]\n\n")
        await writer.drain()
        writer.close()

    async def cut(reader, writer):
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"10\r\ndata: {\"a\": 1}\n\n\r\n")
        await writer.drain()
        writer.close()

    whole = run_sync(one_reply(until_close))
    assert whole.error_class == "none" and len(whole.events) == 2
    broken = run_sync(one_reply(cut))
    assert broken.error_class == "transport" and "before the reply ended" in broken.error
    assert [d for _, d in broken.events] == [b'{"a": 1}']


def test_connection_refused_and_timeout_are_classified():
    async def silent(reader, writer):
        await read_request(reader)
        await asyncio.sleep(5)

    async def main():
        server, url = await serve(silent)
        async with StreamClient(url) as client:
            slow = await client.post("/x", b"{}", 0.3)
        server.close()
        await server.wait_closed()
        async with StreamClient(url) as client:
            refused = await client.post("/x", b"{}", 1)
        return slow, refused

    slow, refused = run_sync(main())
    assert slow.error_class == "timeout" and "0.3 s" in slow.error
    assert refused.error_class == "transport" and "Connect" in refused.error
