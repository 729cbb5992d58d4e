"""A stream client over several servers in turn: the client-side round robin over an arm's
replicas (routing.client_round_robin), with no router process between client and replica."""
from __future__ import annotations

from stackbook.loadgen.http_client import StreamClient


class RotatingClient:
    """Keep-alive connections to each server; each request goes to the next server in turn (per
    client process: a point sent by several processes is a round robin in each)."""

    def __init__(self, base_urls: list[str], ca_bundle: str | None = None):
        if not base_urls:
            raise ValueError("a rotating client needs at least one server URL")
        self.clients = [StreamClient(url, ca_bundle=ca_bundle) for url in base_urls]
        self.sent = [0] * len(self.clients)
        self._next = 0

    async def preopen(self, n: int, timeout_s: float = 30.0) -> None:
        for client in self.clients:
            await client.preopen(n, timeout_s)

    async def post(self, path: str, body: bytes, timeout_s: float, headers: dict | None = None):
        i, self._next = self._next, (self._next + 1) % len(self.clients)
        self.sent[i] += 1
        return await self.clients[i].post(path, body, timeout_s, headers)

    def close(self) -> None:
        for client in self.clients:
            client.close()

    async def __aenter__(self) -> "RotatingClient":
        return self

    async def __aexit__(self, *exc) -> None:
        self.close()
