"""Every router kind an arm's `router:` accepts: each kind's module holds its spec model and its
kind class; this tuple is the one place that lists them. The campaign's router union is built from it."""
from __future__ import annotations

from typing import Union

from stackbook.routing.client_round_robin import ClientRoundRobin
from stackbook.routing.router_kind import RouterKind
from stackbook.routing.sglang_router import SglangRouter

ROUTER_KINDS: tuple[type[RouterKind], ...] = (SglangRouter, ClientRoundRobin)
ROUTERS: dict[str, type[RouterKind]] = {k.kind: k for k in ROUTER_KINDS}


def router_kinds() -> list[str]:
    return list(ROUTERS)


def router_class(kind: str) -> type[RouterKind]:
    try:
        return ROUTERS[kind]
    except KeyError:
        raise KeyError(f"unknown router kind {kind!r}; router kinds: {', '.join(ROUTERS)}") from None


def router_union():
    """The `router:` mapping's type: one member per kind (told apart by `kind`, the field's discriminator)."""
    return Union[tuple(k.spec_model for k in ROUTERS.values())]


def installable() -> list[type[RouterKind]]:
    """The kinds set-up installs (those that run a router process)."""
    return [k for k in ROUTERS.values() if k.runs_process]
