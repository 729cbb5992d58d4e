"""What the measured centres predict: exact MVA on them (closed loop), the open-loop response at
an offered rate, the held-out check, and the next experiments ranked by what they buy end to end.
Every response goes through the centres a request passes one after another (series_centres)."""
from __future__ import annotations

import math

from stackbook.analysis.demand_map.centres import point_centres, point_counts
from stackbook.analysis.demand_map.layers import Layer, demand_map, improve
from stackbook.analysis.demand_map.orchestration import ROUTER_CENTRE
from stackbook.analysis.queueing import mva
from stackbook.measure.metric_definitions import column


E2E_MEAN = column("e2e_ms", "mean")  # a point's mean time in system, what the closed-loop model reads

# Two centres one request holds at once: the engine's scheduler works beside its compute, on the
# same steps, in a process of its own (engines/facts.py, schedules_beside).
HELD_TOGETHER = ("engine scheduler", "engine compute")


def series_centres(centres: list[Layer]) -> list[Layer]:
    """The centres a request passes one after another. The scheduler and the compute it works
    beside are held at the same time, so they enter as one centre of the larger D/m: two queues in
    series would count the same wall time twice. Each still bounds throughput on its own (the
    utilisation law holds per process: demand_map)."""
    together = [c for c in centres if c.name in HELD_TOGETHER]
    if len(together) < 2:
        return list(centres)
    big = max(together, key=lambda c: c.adjusted_ms)
    held = Layer("engine scheduler + compute (held together)", 1, big.adjusted_ms, 1.0,
                 f"1: the larger of the two, {big.name} (D/m); a request holds both at once",
                 "the engine's scheduler and compute processes, busy on the same steps")
    out = [c for c in centres if c.name not in HELD_TOGETHER]
    out.insert(min(i for i, c in enumerate(centres) if c.name in HELD_TOGETHER), held)
    return out


def unattributed_ms(centres: list[Layer], light_e2e_ms: float) -> float:
    """Light-load response time no centre owns (mean E2E at the lightest load minus what its
    centres take in series there, D/m each, as MVA counts them at N = 1): kept in the model as a
    pure delay, never as a resource."""
    return max(0.0, light_e2e_ms - sum(c.adjusted_ms for c in series_centres(centres))) if centres else 0.0


def mva_on_centres(centres: list[Layer], population: int, delay_ms: float = 0.0) -> list[dict]:
    """Exact MVA over the measured centres in series (series_centres; a centre with m > 1 enters
    as one server of demand D/m: exact at saturation, optimistic below it) plus a delay centre;
    per N, req/s and ms."""
    centres = series_centres(centres)
    demands = [c.adjusted_ms / 1000 for c in centres] + ([delay_ms / 1000] if delay_ms > 0 else [])
    delay = [False] * len(centres) + ([True] if delay_ms > 0 else [])
    return [{"concurrency": r["n"], "throughput_rps": r["throughput"], "response_ms": r["response"] * 1000}
            for r in mva(demands, population, delay=delay)]


def closed_loop_points(sweep: dict) -> list[dict]:
    """Valid closed-loop points with CPU readings, by concurrency."""
    out = []
    for n, p in (sweep.get("points") or {}).items():
        if p.get("concurrency") and p.get(E2E_MEAN) and p.get("request_throughput_rps") and \
                point_counts(n, p, sweep) and p.get("cpu_seconds") and p.get("requests_in_cpu_window"):
            out.append({"point": n, "concurrency": int(p["concurrency"]), "e2e_ms": p[E2E_MEAN],
                        "throughput_rps": p["request_throughput_rps"], "summary": p})
    return sorted(out, key=lambda p: (p["concurrency"], p["point"]))


def mva_check(points: list[dict], engine: dict, log_text: str = "") -> list[dict]:
    """Predict every closed-loop point from the demands measured at one point (the lightest, then
    the heaviest), with the light-load unattributed time as a delay. Under batching demand per
    request falls as the batch grows, so demands from one load are biased at the others: the
    errors show by how much. Rows: fit, concurrency, measured and predicted, error in %."""
    if len(points) < 2:
        return []
    light = points[0]
    rows = []
    for label, fit in (("demands at the lightest load", points[0]), ("demands at the heaviest load", points[-1])):
        centres = point_centres(fit["summary"], engine, log_text)
        delay = unattributed_ms(centres, light["e2e_ms"])
        curve = {r["concurrency"]: r for r in mva_on_centres(centres, max(p["concurrency"] for p in points), delay)}
        for p in points:
            pred = curve[p["concurrency"]]
            rows.append({"fit": f"{label} ({fit['point']})", "concurrency": p["concurrency"], "point": p["point"],
                         "held_out": p["point"] != fit["point"],
                         "measured_rps": p["throughput_rps"], "predicted_rps": pred["throughput_rps"],
                         "rps_error_pct": 100 * (pred["throughput_rps"] - p["throughput_rps"]) / p["throughput_rps"],
                         "measured_e2e_ms": p["e2e_ms"], "predicted_e2e_ms": pred["response_ms"],
                         "e2e_error_pct": 100 * (pred["response_ms"] - p["e2e_ms"]) / p["e2e_ms"]})
    return rows


LEVERS = {"client": "run the client on its own core, or a leaner client, and rerun the sweep",
          "engine front end": "give the API server its own core (or stream every few tokens) and rerun the sweep",
          "engine scheduler": "raise the tokens scheduled per step (a larger batch or "
                              "chunked-prefill budget) and rerun the sweep",
          "engine compute": "give the compute one more thread/core and rerun the sweep (a lighter precision would "
                            "have to pass the canaries again: it is not offered here)",
          ROUTER_CENTRE: "spread the load in the client instead (router kind client_round_robin), or give the router "
                         "a core of its own, and rerun the sweep"}


def demand_ci(sweep: dict, point: str, engine: dict, log_text: str = "") -> dict[str, float | None]:
    """Per centre: the 95% CI half-width (ms) of its D/m over the repetitions at the chosen point's
    load, where there are at least two; else None (one reading, no interval)."""
    points = sweep.get("points") or {}
    level = points[point].get("level")
    reps = [point_centres(p, engine, log_text) for n, p in points.items()
            if p.get("level") == level and point_counts(n, p, sweep)]
    reps = [r for r in reps if r]
    if len(reps) < 2:
        return {}
    from stackbook.stats import mean_ci95
    out = {}
    for name in {c.name for r in reps for c in r}:
        out[name] = mean_ci95([c.adjusted_ms for r in reps for c in r if c.name == name])[1]
    return out


def open_response_ms(centres: list[Layer], rate_rps: float, delay_ms: float = 0.0) -> float:
    """Mean response of an open network at an offered rate: each centre in series as one server of
    demand D/m, R = sum (D/m) / (1 - U) with U = rate x D/m, plus the delay; infinite at or past
    saturation."""
    total = delay_ms
    for c in series_centres(centres):
        u = rate_rps * c.adjusted_ms / 1000
        if u >= 1:
            return math.inf
        total += c.adjusted_ms / (1 - u)
    return total


def closed_response_ms(centres: list[Layer], population: float, delay_ms: float = 0.0) -> float:
    """Mean response of the closed network at a population that may be a mean (the requests a
    replayed log's sessions kept in flight): exact MVA at the whole numbers either side, the
    response interpolated between them; never fewer than one."""
    n = max(1.0, float(population))
    whole = int(n)
    curve = mva_on_centres(centres, whole + 1, delay_ms)
    below, above = curve[whole - 1]["response_ms"], curve[whole]["response_ms"]
    return below + (n - whole) * (above - below)


def predicted_response_ms(centres: list[Layer], delay_ms: float = 0.0, population: float | None = None,
                          rate_rps: float | None = None) -> float:
    """The model's mean response at the load tested: an open network at an offered rate, else a
    closed one at its population (one client where none is given)."""
    if rate_rps:
        return open_response_ms(centres, rate_rps, delay_ms)
    return closed_response_ms(centres, population or 1, delay_ms)


def next_experiments(centres: list[Layer], concurrency: float | None, delay_ms: float = 0.0,
                     ci_ms: dict | None = None, risk_cost: dict | None = None, cut: float = 0.10,
                     rate_rps: float | None = None, e2e_slo_ms: float | None = None) -> list[dict]:
    """Candidate changes, one per measured centre (cut its demand by `cut`), ranked by what the
    model predicts they buy end to end: the bound first, then the response time at the load tested
    (a closed loop's concurrency, or the mean a replayed log's sessions kept in flight, by MVA; an
    open loop at its offered rate, never as a count). Only candidates whose predicted mean E2E stays
    inside the SLO are kept; confidence comes from the repetitions. The top row is phrased as the
    smallest experiment that could disprove the current bottleneck. Risk and cost are the user's,
    'unknown' unless given."""
    if not centres:
        return []
    ci_ms, risk_cost = ci_ms or {}, risk_cost or {}
    base = demand_map(centres)
    n = concurrency or 1

    def response(layers) -> float:
        return predicted_response_ms(list(layers), delay_ms, n, rate_rps)

    at = (f"{rate_rps:.3g} req/s offered" if rate_rps else f"N={n:g}" if float(n).is_integer()
          else f"N={n:.2f} in flight")
    r0 = response(centres)
    rows = []
    for c in centres:
        after_layers = improve(tuple(centres), c.name, cut)
        after = demand_map(after_layers)
        r1 = response(after_layers)
        if e2e_slo_ms is not None and not r1 <= e2e_slo_ms:
            continue  # outside the SLO even after the change: not a candidate
        change = 100 * (r1 / r0 - 1) if math.isfinite(r0) and math.isfinite(r1) else math.nan
        gain = 100 * (after["throughput_bound_rps"] / base["throughput_bound_rps"] - 1)
        ci = ci_ms.get(c.name)
        rows.append({
            "change": f"cut {c.name} demand {cut:.0%}", "centre": c.name, "adjusted_ms": c.adjusted_ms,
            "bound_gain_pct": gain, "response_change_pct": change, "at_load": at,
            "predicted_e2e_ms": r1,
            "expected_gain": (f"+{gain:.1f}% bound ({base['throughput_bound_rps']:.3g} -> "
                              f"{after['throughput_bound_rps']:.3g} req/s), {change:+.1f}% mean E2E at {at}"),
            "confidence": (f"D/m ±{ci:.2f} ms (95% CI over repetitions)" if ci is not None and not math.isnan(ci)
                           else "one reading at this load: no interval (add repetitions)"),
            "risk": (risk_cost.get(c.name) or {}).get("risk", "unknown"),
            "cost": (risk_cost.get(c.name) or {}).get("cost", "unknown")})
    if not rows:
        return []
    rows.sort(key=lambda r: (-round(r["bound_gain_pct"], 6), r["response_change_pct"], -r["adjusted_ms"]))
    top = rows[0]
    lever = LEVERS.get(top["centre"], "make that process do less per request and rerun the sweep")
    top["change"] = (f"smallest experiment that could disprove '{base['bottleneck']} is the bottleneck': "
                     f"{lever}; the model predicts {top['expected_gain']}: if throughput at the highest load "
                     "does not rise, the bottleneck is elsewhere")
    for i, r in enumerate(rows, 1):
        r["rank"] = i
    return rows
