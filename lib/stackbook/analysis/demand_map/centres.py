"""Resource centres measured from a sweep point: each measured interval owned by one centre (the
client process, a router in front of replicas, the engine's front end, its scheduler, its compute
over every replica), with demands from the utilisation law D_k = busy_k / completed requests."""
from __future__ import annotations

import re

from stackbook.analysis.demand_map.layers import Layer
from stackbook.analysis.demand_map.orchestration import orchestration_centre, replica_capacity
from stackbook.engines import registry


def client_capacity(point: dict) -> tuple[float, str]:
    """m of the client centre and why: one core per client process that sent the point (each
    event loop runs on one core at a time, Python's interpreter lock), whatever the host has."""
    n = point.get("client_processes") or 1
    if n == 1:
        return 1.0, ("1: one client process; its event loop runs on one core at a time (Python's interpreter "
                     "lock), whatever the host has")
    return float(n), (f"{n}: the point was sent by {n} client processes (protocol.loadgen.processes), each "
                      "event loop on one core at a time")


def compute_capacity(engine: dict, log_text: str = "") -> tuple[float, str]:
    """m of the engine's compute centre and why: the threads or cores the engine was given, read
    from its launch command (llama.cpp's --threads), else from its log (vLLM-CPU's OpenMP binding,
    `core ids=[...]`), else the host's physical cores."""
    cmd = (engine.get("launch") or {}).get("command") or []
    for flag in ("--threads", "-t"):
        if flag in cmd and cmd.index(flag) + 1 < len(cmd):
            n = int(cmd[cmd.index(flag) + 1])
            return float(n), f"{n}: the engine was launched with {flag} {n} (one compute thread per core)"
    m = re.search(r"core ids=\[([\d,\s]+)\]", log_text)
    if m:
        ids = [x for x in m.group(1).split(",") if x.strip()]
        return float(len(ids)), (f"{len(ids)}: the engine bound its compute threads to core(s) "
                                 f"[{m.group(1).strip()}] (its log's OpenMP binding)")
    cores = (engine.get("host") or {}).get("physical_cores")
    if cores:
        return float(cores), f"{cores}: the host's physical cores (the engine stated no thread count)"
    return 1.0, "1: assumed (neither the engine nor the host record a thread or core count)"


def kind_roles(kind: str | None) -> tuple:
    """The process roles of the arm's own kind; every kind's where the record names none (older runs)."""
    try:
        return registry.adapter_class(kind).process_roles
    except (KeyError, ValueError):
        return registry.process_roles()


def _per_request_ms(seconds: float, completed: int) -> float:
    return 1000.0 * seconds / completed


def point_centres(point: dict, engine: dict, log_text: str = "") -> list[Layer]:
    """Resource centres of one sweep point, each from the utilisation law D = busy / completions.
    Every CPU second is owned by exactly one process, so no interval is counted twice."""
    done = point.get("requests_in_cpu_window")
    cpu = point.get("cpu_seconds")
    if not done or not cpu:
        return []
    generated = (point.get("work_tokens") or {}).get("generated_tokens")
    steps = generated / done if generated else 1.0
    client_m, client_why = client_capacity(point)
    centres = [Layer("client", 1, _per_request_ms(cpu["client"], done), client_m, client_why,
                     "client processes' CPU seconds (user + system) / requests completed in the point")]
    roles = dict(cpu.get("engine") or {})
    router = orchestration_centre(point, roles, done)  # replicas behind a router: the router's own centre
    if router is not None:
        centres.append(router)
    m, why_m = replica_capacity(*compute_capacity(engine, log_text), point)
    # The arm's kind states which of its processes computes, schedules or fronts (engines/facts.py):
    # a compute role computes unless the role it schedules beside is present, which then computes.
    present = [r for r in kind_roles(engine.get("kind")) if r.role in roles]
    names = {r.role for r in present}
    compute = next((r for r in present if r.centre == "compute" and r.schedules_beside not in names), None)
    compute_role = compute.role if compute else None
    front = next((r for r in present if r.centre == "front end"), None)
    if front is not None and compute is not None:
        centres.append(Layer("engine front end", 1, _per_request_ms(roles.pop(front.role), done), 1.0,
                             front.why_m, front.measured_as))
    scheduler = next((r for r in present if compute is not None and r.schedules_beside == compute_role), None)
    if scheduler is not None:
        centres.append(Layer("engine scheduler", 1, _per_request_ms(roles.pop(scheduler.role), done), 1.0,
                             scheduler.why_m, scheduler.measured_as))
    http_apart = compute is not None and compute.http_role in roles
    if http_apart:
        centres.append(Layer("engine front end", 1, _per_request_ms(roles.pop(compute.http_role), done), 1.0,
                             "1: counted as one server (its HTTP threads share the cores the compute runs on)",
                             f"{compute_role}'s HTTP threads (those born before its model loaded): CPU seconds "
                             "(schedstat) / requests completed"))
    if compute is not None:
        busy_ms = _per_request_ms(roles.pop(compute_role), done)
        note = (" (less its HTTP threads)" if http_apart
                else " (its HTTP threads included: one process)" if compute.serves_http else "")
        centres.append(Layer("engine compute", steps, busy_ms / steps, m, why_m,
                             f"{compute_role} process CPU seconds / requests completed{note}; V = engine steps "
                             "per request (one per generated token, shared across the batch)"))
    for role, seconds in sorted(roles.items()):
        if seconds > 0:
            centres.append(Layer(f"engine process {role}", 1, _per_request_ms(seconds, done), 1.0,
                                 "1: one process of the engine's group, not known to split its work",
                                 f"{role} process CPU seconds / requests completed"))
    if compute_role is None and point.get("engine_time_ms") and point.get("batch_size_mean"):
        t = point["engine_time_ms"]
        busy_ms = ((t.get("prefill") or 0) + (t.get("decode") or 0)) / max(1.0, point["batch_size_mean"])
        centres.append(Layer("engine compute", steps, busy_ms / steps, 1.0,
                             "1: the engine's clock times its own busy steps, one engine",
                             "engine-reported prefill + decode per request / mean batch size"))
    if not any(c.name.startswith("engine") for c in centres):
        return []  # the client alone is no map: the engine is elsewhere (remote) or counted nothing
    return centres


def point_counts(name: str, p: dict, sweep: dict) -> bool:
    """A point counts for the map when its load was valid and no preregistered rule discarded it."""
    ok = (sweep.get("load_validity") or {}).get(name, {}).get("valid", True)
    return bool(ok) and not p.get("discarded")
