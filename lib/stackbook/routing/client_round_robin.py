"""The baseline with no router process: the load generator itself sends its requests to the
replicas in turn. Nothing stands between client and replica, so a routed deployment's figures
beside these show what the router adds, and what its policy buys."""
from __future__ import annotations

import dataclasses
from typing import Literal

from stackbook.routing.router_kind import RouterKind
from stackbook.routing.spec import RouterSpec


class ClientRoundRobinSpec(RouterSpec):
    kind: Literal["client_round_robin"]
    policy: Literal["round_robin"] = "round_robin"


class ClientRoundRobin(RouterKind):
    spec_model = ClientRoundRobinSpec
    runs_process = False
    installs = "nothing: the load generator rotates over the replicas itself"
    shares_source = "each replica's own request counter (the client sends to each in turn)"

    def ready(self, client) -> bool:
        return True

    @classmethod
    def route(cls, target, replica_urls: list[str]):
        """The client's requests go to each replica in turn (loadgen.rotating_client)."""
        return dataclasses.replace(target, replica_urls=tuple(replica_urls))
