"""Each arm's capacity inside the SLO over its repetitions' searches, the predictions beside it
with their errors, the cost at that capacity, and the sentence the report opens on."""
from __future__ import annotations

import pandas as pd

from stackbook.analysis.demand_map.experiments import E2E_MEAN, mva_on_centres
from stackbook.analysis.demand_map.measured import e2e_slo_ms
from stackbook.analysis.queueing import fit_closed_loop
from stackbook.capacity.predictions import (
    combined_interval,
    cost_per_m_output_tokens,
    interval_error,
    largest_within,
)


def _fmt(x) -> str:
    return "none" if x is None else f"{x:g}"


def slo_words(slo: dict, target: float) -> str:
    bounds = [f"TTFT ≤ {slo['ttft_ms']:g} ms", f"TPOT ≤ {slo['tpot_ms']:g} ms"]
    if slo.get("e2e_ms"):
        bounds.append(f"E2E ≤ {slo['e2e_ms']:g} ms")
    return f"{' and '.join(bounds)} for at least {target:.0%} of requests"


def _users(load) -> str:
    return f"{_fmt(load)} concurrent user{'' if load == 1 else 's'}"


def capacity_sentence(arm: str, lower, upper, slo: dict, target: float) -> str:
    """What the interval says, and only that: each end as its probes proved it."""
    within = slo_words(slo, target)
    if lower is None and upper is None:
        return f"{arm}: no load was proven inside or outside {within}; its searches say why."
    if lower is None:
        return f"{arm}: no load was proven inside {within}; {_users(upper)} were proven outside it."
    if upper is None:
        return (f"{arm} carries at least {_users(lower)} inside {within}; no load was proven "
                "outside it, so the capacity may lie higher.")
    return (f"{arm} carries {_users(lower)} inside {within}, and not {_fmt(upper)}: {_fmt(lower)} "
            f"was proven inside and {_fmt(upper)} outside in every repetition (95% bounds), so its capacity lies "
            f"from {_fmt(lower)} up to below {_fmt(upper)}.")


def _probes(rounds: list[dict]) -> list[dict]:
    return [p for r in rounds for p in r.get("probes", [])]


def _throughput_at(rounds: list[dict], load) -> float | None:
    tok = [p.get("output_throughput_tok_s") for p in _probes(rounds)
           if p["load"] == load and p["verdict"] == "inside" and p.get("output_throughput_tok_s")]
    return sum(tok) / len(tok) if tok else None


def ladder_rungs(plan: dict, upper) -> int | None:
    """Loads a ladder at the search's resolution climbs from the start to its first rung outside."""
    if upper is None:
        return None
    return int((upper - plan["start"]) // plan["tolerance"]) + 1


def arm_capacity_row(name: str, a: dict, cost: dict | None) -> dict | None:
    cap = (a.get("results") or {}).get("capacity")
    if not cap:
        return None
    rounds = list(cap["rounds"].values())
    lower, upper, agree = combined_interval(rounds)
    tok = _throughput_at(rounds, lower)
    row = {"arm": name, "lower": lower, "upper": upper, "repetitions": len(rounds), "agreement": agree,
           "resolved_every_round": all(r.get("resolved") for r in rounds),
           "stop_reasons": [r.get("stop_reason") for r in rounds],
           "probes": len(_probes(rounds)), "requests": sum(r.get("requests", 0) for r in rounds),
           "probing_s": round(sum(r.get("duration_s", 0) for r in rounds), 1),
           "ladder_rungs_per_round": ladder_rungs(cap["plan"], upper),
           "output_tok_s_at_lower": tok,
           "sentence": capacity_sentence(name, lower, upper, cap["slo"], cap["target"])}
    if cost:
        row["cost_per_m_output_tokens_usd"] = cost_per_m_output_tokens(cost["hardware_hour_usd"], tok)
        row["managed_per_m_output_tokens_usd"] = cost.get("managed_per_m_output_tokens_usd")
    return row


def _sweep_points(sweep: dict) -> list[dict]:
    """The sweep's closed-loop points no rule discarded, lightest first."""
    pts = [{"point": n, "concurrency": int(p["concurrency"]), "e2e_ms": p[E2E_MEAN],
            "throughput_rps": p["request_throughput_rps"]}
           for n, p in (sweep.get("points") or {}).items()
           if p.get("concurrency") and p.get(E2E_MEAN) and p.get("request_throughput_rps")
           and not p.get("discarded")]
    return sorted(pts, key=lambda p: (p["concurrency"], p["point"]))


def mean_against_percentile(slo: dict, bound_ms: float) -> str:
    """What an MVA prediction's test is: a mean E2E held to a bound the SLO sets for a share of
    requests, so where the spread is wide the mean stays within while that share does not."""
    share = f"{slo['attainment']:.0%} of requests" if slo.get("attainment") else "every request"
    source = ("the SLO's E2E bound" if slo.get("e2e_ms") else
              f"TTFT ≤ {slo['ttft_ms']:g} ms plus TPOT ≤ {slo['tpot_ms']:g} ms for each token after the first")
    return (f"the largest concurrency whose mean E2E stays within {bound_ms:.0f} ms ({source}): a mean held to a "
            f"bound the SLO sets for {share}, not the percentile itself")


def _mva_fit_prediction(sweep: dict, slo: dict, bound_ms: float | None, most: int) -> tuple[str, int | None, str]:
    """(its name, the prediction, its basis): fitted on two loads where the sweep's throughput grew
    past its lightest load; where it was highest at the lightest load, both ends come from that
    one load, and the name says so."""
    pts = _sweep_points(sweep)
    if len({p["concurrency"] for p in pts}) < 2 or bound_ms is None:
        return "MVA fitted on the sweep's loads", None, "needs closed-loop points at two loads and an SLO"
    light, heavy = pts[0], max(pts, key=lambda p: p["throughput_rps"])
    fit = fit_closed_loop([{"concurrency": p["concurrency"], "throughput_rps": p["throughput_rps"],
                            "response_s": p["e2e_ms"] / 1000} for p in (light, heavy)])
    n = largest_within(lambda c: fit.predict(c)["response_s"] * 1000, bound_ms, most)
    test = mean_against_percentile(slo, bound_ms)
    if heavy["concurrency"] == light["concurrency"]:
        others = max(p["throughput_rps"] for p in pts if p["concurrency"] != light["concurrency"])
        return "MVA fitted from one load", n, (
            f"one-load MVA: the throughput was highest at the lightest load swept ({heavy['point']}, "
            f"{heavy['throughput_rps']:.3g} req/s; the heavier loads reached at most {others:.3g}), so the light-load "
            f"response ({light['point']}) and the saturation throughput both come from concurrency "
            f"{light['concurrency']}, as if the engine were saturated there; nothing "
            f"else in the sweep tests it: {test}")
    return "MVA fitted on two loads", n, (
        f"two-centre MVA, light-load response from {light['point']} and saturation throughput from "
        f"{heavy['point']} (the highest measured): {test}")


def _memory_bound(sizing: dict) -> tuple[float | None, str]:
    """Sizing's memory arithmetic: the live sequences of the protocol's context the cache pool
    holds. The engine's configured limit (slots, max_num_seqs) is its own row."""
    live = sizing.get("max_live_sequences")
    if live is None or not sizing.get("bytes_per_sequence"):
        return None, "not sized (the sizing stage did not run or had nothing to size)"
    return live, (f"arithmetic: cache pool {sizing['cache_pool_bytes'] / 2**30:.1f} GiB "
                  f"({sizing.get('cache_pool_source') or 'source not recorded'}) / "
                  f"{sizing['bytes_per_sequence'] / 2**20:.1f} MiB of one sequence at the protocol's context of "
                  f"{sizing.get('context')} tokens (a memory bound, not the engine's configured limit)")


def prediction_rows(name: str, a: dict, dmap, lower, upper) -> list[dict]:
    """Sizing's memory bound, the engine's own limit, the demand map's MVA and the fitted MVA,
    each with its error against [lower, upper]; the SLO and the largest load are the ones the
    search ran under (its results section)."""
    results = a["results"]
    sizing, sweep = results.get("sizing") or {}, results.get("sweep") or {}
    slo, most = results["capacity"]["slo"], int(results["capacity"]["plan"]["max_load"])
    rows = []

    def add(what: str, predicted, basis: str):
        rows.append({"arm": name, "prediction": what, "predicted": predicted, "measured_lower": lower,
                     "measured_upper": upper, "error": interval_error(predicted, lower, upper), "basis": basis})

    add("sizing: live sequences the pool holds", *_memory_bound(sizing))
    real = (sizing.get("realized_capacity") or {}).get("max_concurrency")
    add("engine: live sequences it allows", real, "the engine's own report of its limit (slots, max_num_seqs)"
        if real is not None else "the engine reported no limit")
    point = (sweep.get("points") or {}).get(getattr(dmap, "point", None) or "", {})
    bound = e2e_slo_ms(slo, point) if point else None
    if dmap is not None and getattr(dmap, "measured", False) and bound is not None:
        curve = {r["concurrency"]: r["response_ms"] for r in
                 mva_on_centres(dmap.layers(), most, dmap.unattributed_ms or 0.0)}
        add("demand map: MVA on its centres", largest_within(curve.__getitem__, bound, most),
            f"exact MVA on the centres measured at {dmap.point}: {mean_against_percentile(slo, bound)}")
    else:
        add("demand map: MVA on its centres", None, f"no measured demand map ({getattr(dmap, 'status', 'none')})")
    add(*_mva_fit_prediction(sweep, slo, bound if bound is not None else
                             e2e_slo_ms(slo, next(iter((sweep.get("points") or {}).values()), {})), most))
    return rows


def capacity_tables(campaign, arms: dict, demand_maps: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per arm that searched, one row per arm and prediction)."""
    cost = campaign.cost.model_dump() if getattr(campaign, "cost", None) else None
    caps, preds = [], []
    for name, a in arms.items():
        row = arm_capacity_row(name, a, cost)
        if row is None:
            continue
        caps.append(row)
        preds += prediction_rows(name, a, demand_maps.get(name), row["lower"], row["upper"])
    return pd.DataFrame(caps), pd.DataFrame(preds)


def predictions_display(rows: list[dict]) -> pd.DataFrame:
    """The predictions as a reader reads them: the error as a signed share, "inside" at 0."""
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame

    def err(e):
        if e is None or pd.isna(e):
            return "-"
        return "inside the interval" if e == 0 else f"{e:+.0%} beyond the nearer end"

    frame["error"] = frame["error"].map(err)
    frame["predicted"] = frame["predicted"].map(lambda v: "-" if v is None or pd.isna(v) else f"{v:g}")
    return frame
