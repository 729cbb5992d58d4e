"""Queueing models for a serving stack: M/G/1 (Pollaczek-Khinchine), Kingman's G/G/1
approximation, exact Mean Value Analysis for closed networks (a closed-loop benchmark is one), and
the fit of a closed-loop sweep checked on held-out loads. Pure functions."""
from __future__ import annotations

from dataclasses import dataclass

# --------------------------------------------------------------------------- open queues

def _check_utilization(rho: float) -> None:
    if not 0 <= rho < 1:
        raise ValueError(f"utilization rho = {rho:.3f}: the queue is unstable at rho >= 1 (lower the arrival "
                         "rate or add capacity)")


def kingman_wait(arrival_rate: float, service_mean: float, arrival_cv: float, service_cv: float) -> float:
    """G/G/1 approximation: Wq ~ rho / (1 - rho) x (Ca^2 + Cs^2) / 2 x S. At Ca = 1 (Poisson
    arrivals) it is exact: the Pollaczek-Khinchine M/G/1 mean wait."""
    rho = arrival_rate * service_mean
    _check_utilization(rho)
    return rho / (1 - rho) * (arrival_cv**2 + service_cv**2) / 2 * service_mean


def pollaczek_khinchine_wait(arrival_rate: float, service_mean: float, service_cv: float) -> float:
    """M/G/1 mean wait, exact for Poisson arrivals: Wq = rho x S / (1 - rho) x (1 + Cs^2) / 2."""
    rho = arrival_rate * service_mean
    _check_utilization(rho)
    return rho * service_mean / (1 - rho) * (1 + service_cv**2) / 2


UNSTABLE = "unstable (ρ ≥ 1)"


@dataclass(frozen=True)
class WaitPrediction:
    """What the open-queue formulas say for one measured point. At rho >= 1 no mean wait exists
    (the queue grows for as long as the load lasts): the outcome says so and the waits are None,
    so a table of points shows it instead of stopping at the first overloaded one. P-K is given
    only where the arrivals are Poisson, the one case it assumes."""
    utilization: float
    kingman_s: float | None
    pollaczek_khinchine_s: float | None
    outcome: str  # "stable" or UNSTABLE

    @property
    def stable(self) -> bool:
        return self.outcome != UNSTABLE


def predict_wait(arrival_rate: float, service_mean: float, arrival_cv: float, service_cv: float,
                 poisson_arrivals: bool) -> WaitPrediction:
    """Kingman's G/G/1 mean wait and, for Poisson arrivals, Pollaczek-Khinchine's, from the
    rate, the mean service time and the two coefficients of variation (seconds in, seconds out)."""
    rho = arrival_rate * service_mean
    if rho >= 1:
        return WaitPrediction(rho, None, None, UNSTABLE)
    pk = pollaczek_khinchine_wait(arrival_rate, service_mean, service_cv) if poisson_arrivals else None
    return WaitPrediction(rho, kingman_wait(arrival_rate, service_mean, arrival_cv, service_cv), pk, "stable")


# --------------------------------------------------------------------------- closed networks

def mva(demands: list[float], population: int, think_time: float = 0.0, delay: list[bool] | None = None) -> list[dict]:
    """Exact Mean Value Analysis of a closed product-form network.

    demands: D_k per center (seconds); delay[k] marks an infinite-server (pure delay) center.
    Returns, for n = 1..population, throughput X, response time R and queue lengths.
    """
    if population < 1:
        raise ValueError("population must be at least 1")
    delay = delay or [False] * len(demands)
    q = [0.0] * len(demands)
    out = []
    for n in range(1, population + 1):
        r_k = [d if is_delay else d * (1 + qk) for d, qk, is_delay in zip(demands, q, delay)]
        r = sum(r_k)
        x = n / (think_time + r)
        q = [x * rk for rk in r_k]
        out.append({"n": n, "throughput": x, "response": r, "queue": list(q)})
    return out


@dataclass(frozen=True)
class ClosedLoopFit:
    """A two-center model of an engine under a closed loop: a queueing center whose demand is
    the inverse of the saturation throughput, and a delay center for the rest of a light-load
    response (work that overlaps across requests, as batched decode does)."""
    queue_demand_s: float
    delay_demand_s: float

    def predict(self, concurrency: int) -> dict:
        r = mva([self.queue_demand_s, self.delay_demand_s], concurrency, delay=[False, True])[-1]
        return {"concurrency": concurrency, "throughput_rps": r["throughput"], "response_s": r["response"]}


def fit_closed_loop(points: list[dict]) -> ClosedLoopFit:
    """Fit from measured (concurrency, throughput_rps, response_s) points: the light-load
    response from the lowest concurrency, the bottleneck demand from the highest throughput."""
    if len(points) < 2:
        raise ValueError("a fit needs at least two sweep points (light load and the highest load)")
    light = min(points, key=lambda p: p["concurrency"])
    x_max = max(p["throughput_rps"] for p in points)
    d_q = 1.0 / x_max
    d_d = max(0.0, light["response_s"] - d_q)
    return ClosedLoopFit(d_q, d_d)


def _weight(x) -> float:
    """A repetition's weight in its load's mean; one where it records none (an equal share)."""
    return float(x) if isinstance(x, (int, float)) and x > 0 and x == x else 1.0


def pooled_loads(points: list[dict]) -> list[dict]:
    """One entry per concurrency, its repetitions pooled: the mean response weighted by requests
    completed (`completed`), the throughput weighted by each repetition's window (`window_s`), so
    a fit reads a load's mean, not whichever repetition came first. Lightest load first."""
    by_load: dict[int, list[dict]] = {}
    for p in points:
        by_load.setdefault(int(p["concurrency"]), []).append(p)
    out = []
    for c, reps in sorted(by_load.items()):
        n = [_weight(r.get("completed")) for r in reps]
        w = [_weight(r.get("window_s")) for r in reps]
        out.append({"concurrency": c, "repetitions": len(reps),
                    "points": [r["point"] for r in reps if r.get("point")],
                    "response_s": sum(r["response_s"] * k for r, k in zip(reps, n)) / sum(n),
                    "throughput_rps": sum(r["throughput_rps"] * k for r, k in zip(reps, w)) / sum(w)})
    return out


def held_out_error(loads: list[dict]) -> list[dict]:
    """Fit on the lightest and heaviest loads, predict the loads between (held out: the fit never
    read them), report the relative error. `loads` holds one entry per concurrency (pooled_loads):
    a repetition of a fitted load is no test of the fit. Fewer than three loads: nothing held out."""
    seen = [int(p["concurrency"]) for p in loads]
    twice = sorted({c for c in seen if seen.count(c) > 1})
    if twice:
        raise ValueError(f"held_out_error takes one entry per load, but concurrency {twice} appears more than "
                         "once: pool the repetitions first (queueing.pooled_loads)")
    pts = sorted(loads, key=lambda p: p["concurrency"])
    if len(pts) < 3:
        return []
    fit = fit_closed_loop([pts[0], pts[-1]])
    rows = []
    for p in pts[1:-1]:
        pred = fit.predict(int(p["concurrency"]))
        rows.append({"concurrency": p["concurrency"], "measured_response_s": p["response_s"],
                     "predicted_response_s": pred["response_s"],
                     "response_error_pct": 100 * (pred["response_s"] - p["response_s"]) / p["response_s"],
                     "measured_throughput_rps": p["throughput_rps"], "predicted_throughput_rps": pred["throughput_rps"],
                     "throughput_error_pct":
                         100 * (pred["throughput_rps"] - p["throughput_rps"]) / p["throughput_rps"]})
    return rows


def closed_loop_check(points: list[dict]) -> tuple[ClosedLoopFit | None, list[dict], str]:
    """An arm's closed-loop model from its points (concurrency, throughput_rps, response_s; the
    repetitions are pooled per load): the fit on the lightest and heaviest loads, its error at each
    load between, and a sentence saying what was held out (or why nothing could be)."""
    loads = pooled_loads(points)
    if len(loads) < 2:
        return None, [], (f"no fit: one load tested (concurrency {loads[0]['concurrency']})" if loads
                          else "no fit: no load tested")
    rows = held_out_error(loads)
    if rows:
        held = ", ".join(str(r["concurrency"]) for r in rows)
        return fit_closed_loop([loads[0], loads[-1]]), rows, (
            f"fitted on concurrency {loads[0]['concurrency']} and {loads[-1]['concurrency']}; "
            f"held out: {held}")
    return fit_closed_loop([loads[0], loads[-1]]), [], (
        f"no load held out: the fit used both loads tested (concurrency {loads[0]['concurrency']} and "
        f"{loads[-1]['concurrency']}); a third load between them would test it")
