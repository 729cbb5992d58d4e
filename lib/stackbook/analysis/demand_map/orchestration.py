"""The demand map of replicas behind a router: the router as an orchestration centre (its CPU
seconds per request, visited once per attempt, retries counted apart) and the replicas as one
centre of m = N x threads servers; each replica's own demand beside it; and whether two replicas
give twice one's capacity, measured and as MVA on the measured centres predicts it."""
from __future__ import annotations

import math

from stackbook.analysis.demand_map.layers import Layer

ROUTER_CENTRE = "orchestration (router)"


def router_roles(point: dict) -> tuple[str, ...]:
    """The process roles a point's router ran under (routing/<kind>.py); none without a router."""
    routing = point.get("routing") or {}
    if not routing.get("router"):
        return ()
    from stackbook.routing.registry import router_class  # the kind's own roles, where it names any
    try:
        return tuple(r.role for r in router_class(routing["router"]).process_roles)
    except (KeyError, ValueError):
        return ("router",)


def router_visits(counts: dict | None) -> tuple[float, str]:
    """Attempts the router makes per request (1 + its retries over its requests), and in words."""
    counts = counts or {}
    requests, retries = counts.get("requests") or 0, counts.get("retries") or 0
    if not requests:
        return 1.0, "1 attempt per request (the router counted no request over the point)"
    v = 1 + retries / requests
    return v, f"{v:.3g} attempts per request: {requests:g} requests, {retries:g} retried (counted apart)"


def orchestration_centre(point: dict, roles: dict[str, float], done: int) -> Layer | None:
    """The router's centre from a point: its CPU seconds (popped from `roles`) over the requests
    completed in the CPU window is D; V the attempts per request; S = D / V; m = 1 (one process,
    no core of its own: it runs in the replicas' gaps). None where no router process ran."""
    seconds = sum(roles.pop(r) for r in router_roles(point) if r in roles)
    if not seconds or not done:
        return None
    v, visits = router_visits((point.get("routing") or {}).get("router_counts"))
    demand_ms = 1000.0 * seconds / done
    return Layer(ROUTER_CENTRE, v, demand_ms / v, 1.0,
                 "1: one router process with no core of its own (it runs in the replicas' gaps)",
                 f"router process CPU seconds / requests completed in the point; V = {visits}")


def replica_capacity(m: float, why_m: str, point: dict) -> tuple[float, str]:
    """The compute centre of N replicas: N times one replica's m (each replica its own servers)."""
    n = int((point.get("routing") or {}).get("replica_count") or 1)
    if n <= 1:
        return m, why_m
    return m * n, f"{m * n:g}: {n} replicas, each {why_m}"


def replica_demands(point: dict) -> list[dict]:
    """Each replica's own centre at a point: its CPU seconds over the requests it served (the
    router's count, or inferred where the router keeps none), with its busy fraction and share."""
    routing = point.get("routing") or {}
    rows = []
    for r, share in zip(routing.get("replicas") or [], routing.get("request_shares") or []):
        served, cpu = r.get("requests"), r.get("cpu_s")
        rows.append({"replica": r["replica"], "requests": served, "share": share,
                     "demand_ms": round(1000.0 * cpu / served, 3) if cpu is not None and served else None,
                     "busy_fraction_cpu": r.get("busy_fraction_cpu"), "prefix_hit_rate": r.get("prefix_hit_rate")})
    return rows


def ratio_with_interval(a: list[float], b: list[float], confidence: float) -> dict:
    """mean(a) / mean(b) with the interval decision.ratio_interval gives over repetitions."""
    from stackbook.analysis.decision import ratio_interval

    est, lo, hi = ratio_interval(a, b, confidence)
    return {"ratio": est, "lo": lo, "hi": hi}


def two_over_one(one: list[float], many: list[float], predicted_many_rps: float | None,
                 predicted_one_rps: float | None, replicas: int, confidence: float) -> dict:
    """Does N give N times one: the N-replica deployment's measured throughput over one replica's at
    the same load (each a list over repetitions, with the ratio's interval), beside the ratio MVA on
    each arm's measured centres predicts. `scales` says whether the interval reaches N, lies below
    it, or cannot say (one repetition)."""
    out = {"replicas": replicas, "measured_one_rps": sum(one) / len(one) if one else None,
           "measured_many_rps": sum(many) / len(many) if many else None}
    if not one or not many:
        return out | {"ratio": None, "lo": None, "hi": None, "predicted_ratio": None, "scales": "not measured"}
    out |= ratio_with_interval(many, one, confidence)
    both = predicted_many_rps and predicted_one_rps
    out["predicted_ratio"] = predicted_many_rps / predicted_one_rps if both else None
    lo, hi = out["lo"], out["hi"]
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        out["scales"] = f"one repetition: {out['ratio']:.2f}x, no interval"
    elif hi < replicas:
        out["scales"] = f"below {replicas}x: the whole interval [{lo:.2f}, {hi:.2f}] lies under it"
    else:
        out["scales"] = f"{replicas}x not excluded: the interval [{lo:.2f}, {hi:.2f}] reaches it"
    return out
