"""The rules an arm with replicas must keep, checked when the campaign is read: each names the
field and the fix."""
from __future__ import annotations

from stackbook.routing.registry import installable
from stackbook.routing.spec import RouterSpec


def deployment_problem(replicas: int, router: RouterSpec | None, engine, known_delay) -> str | None:
    """Why an arm's replicas and router cannot run together, naming the field and the fix; None
    when they can (one replica without a router is today's single engine)."""
    if router is None:
        if replicas > 1:
            others = " or ".join(k.kind for k in installable())
            return (f"replicas: {replicas} replicas need a router to share the load; add router: "
                    "{kind: client_round_robin} (the client's own round robin, no router process), or a router "
                    f"process of kind {others} with its policy; or set replicas: 1")
        return None
    if replicas < 2:
        return (f"router: a router needs replicas of 2 or more to choose between (replicas is {replicas}); "
                "set replicas: 2 or more, or remove router")
    if not engine.serves_local_weights:
        return (f"replicas: kind {engine.kind!r} is an endpoint served elsewhere, so stackbook cannot start "
                "replicas of it; use a kind whose engine stackbook launches here, or set replicas: 1 and remove router")
    if engine.port is not None:
        return (f"engine.port: every replica listens on its own port, so one fixed port ({engine.port}) cannot "
                "serve them; leave engine.port unset so each replica gets a free one")
    if known_delay is not None:
        return ("known_delay: the harness's delay relay stands in front of one engine, not of a router; put the "
                "known delay on an arm with replicas: 1, or remove it")
    return None

