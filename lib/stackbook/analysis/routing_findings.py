"""What a campaign of replicas behind routers finds, as analysis.json's `routing`: per arm and load
what the deployment did (shares, imbalance, realized against implied prefix hits, the router's
time); between a cache-aware router and a balancing one, where affinity stops paying and where it
makes a hotspot (analysis.affinity); and whether N replicas give N times one, measured and as MVA
on the measured centres predicts it (analysis.demand_map.orchestration). Reads the loaded run;
the arithmetic is in those pure modules."""
from __future__ import annotations

import statistics

import pandas as pd

from stackbook.analysis.affinity import Tail, crossover, hotspots
from stackbook.analysis.demand_map.experiments import mva_on_centres
from stackbook.analysis.demand_map.layers import Layer
from stackbook.analysis.demand_map.orchestration import ROUTER_CENTRE, replica_demands, router_roles, two_over_one
from stackbook.measure.slo_bounds import quantile_interval

FIGURE, QUANTILE = "ttft_ms", 0.9
AFFINITY_POLICIES = ("cache_aware",)
BALANCING_POLICIES = ("round_robin", "random", "power_of_two")


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def busiest_first(routing: dict) -> list[int]:
    """A point's replica indices, the one that served the most requests first. Each repetition starts
    its replicas anew, so replica 0 of one is not replica 0 of the next: averaged by index, a hotspot
    that fell on a different replica each time would read as an even split."""
    shares = routing.get("request_shares") or []
    n = routing.get("replica_count") or len(routing.get("replicas") or []) or len(shares)
    return sorted(range(n), key=lambda i: -(shares[i] or 0) if i < len(shares) else 0)


def routing_rows(name: str, ranked: pd.DataFrame, points: dict) -> list[dict]:
    """Per load of one arm: the deployment's figures averaged over its ranked repetitions, each
    repetition's replicas taken busiest first."""
    rows = []
    for load, g in ranked[ranked["arm"] == name].groupby("load", sort=True):
        pts = [points[p] for p in g["point"] if (points.get(p) or {}).get("routing")]
        if not pts:
            continue
        routing = [p["routing"] for p in pts]
        n = routing[0].get("replica_count") or len(routing[0].get("replicas") or [])
        ranks = [busiest_first(r) for r in routing]
        shares = [_mean(r["request_shares"][order[i]] for r, order in zip(routing, ranks) if r.get("request_shares"))
                  for i in range(n)]
        counts = [r.get("router_counts") or {} for r in routing]
        router_cpu = [
            1000
            * sum(p["cpu_seconds"]["engine"].get(role, 0) for role in router_roles(p))
            / p["requests_in_cpu_window"]
            for p in pts
            if p.get("cpu_seconds") and p.get("requests_in_cpu_window")
        ]
        added = routing[0].get("router_added_latency") or {}
        rows.append({"arm": name, "load": float(load), "repetitions": len(pts), "policy": routing[0].get("policy"),
                     "replicas": n, "request_shares": shares,
                     "imbalance": _mean(r.get("imbalance_max_over_mean") for r in routing),
                     "imbalance_by_repetition": [r.get("imbalance_max_over_mean") for r in routing],
                     "realized_hit_rate": _mean(r.get("realized_hit_rate_reported") for r in routing),
                     "implied_hit_rate": _mean(r.get("implied_hit_rate") for r in routing),
                     "replica_hit_rates": [_mean(r["replicas"][order[i]].get("prefix_hit_rate")
                                                 for r, order in zip(routing, ranks)) for i in range(n)],
                     "router_cpu_ms_per_request": _mean(router_cpu) if any(router_cpu) else None,
                     "router_retries": sum(c.get("retries") or 0 for c in counts),
                     "router_requests": sum(c.get("requests") or 0 for c in counts),
                     "router_duration_ms_mean": _mean(c.get("request_duration_ms_mean") for c in counts),
                     "router_added_ms_idle": added.get("added_ms"), "direct_ms_iqr_idle": added.get("direct_ms_iqr"),
                     "per_replica": [replica_demands(p) for p in pts]})
    return rows


def pooled_tails(name: str, ranked: pd.DataFrame, requests: pd.DataFrame | None, confidence: float) -> dict:
    """Per load: the arm's TTFT p90 over its ranked repetitions' measured requests, pooled."""
    out = {}
    if requests is None or requests.empty:
        return out
    for load, g in ranked[ranked["arm"] == name].groupby("load", sort=True):
        mine = requests[requests["point"].isin(set(g["point"])) & (requests["phase"] == "measure")]
        values = sorted(float(v) for v in mine.loc[mine["ok"].astype(bool), FIGURE].dropna())
        if values:
            iv = quantile_interval(values, QUANTILE, confidence)
            out[float(load)] = Tail(float(pd.Series(values).quantile(QUANTILE)), iv.lower, iv.upper, len(values))
    return out


def policy_pairs(arms: dict) -> list[tuple[str, str]]:
    """(cache-aware arm, balancing arm) with the same replicas and router kind."""
    def router(a):
        return getattr(a["arm"], "router", None)
    pairs = []
    for x, ax in arms.items():
        for y, ay in arms.items():
            rx, ry = router(ax), router(ay)
            if rx is not None and ry is not None and rx.policy in AFFINITY_POLICIES and \
                    ry.policy in BALANCING_POLICIES and ax["arm"].replicas == ay["arm"].replicas:
                pairs.append((x, y))
    return pairs


def _layers(dmap) -> list[Layer]:
    return dmap.layers() if dmap is not None and dmap.measured else []


def _throughputs(name: str, ranked: pd.DataFrame, load: float) -> list[float]:
    g = ranked[(ranked["arm"] == name) & (ranked["load"] == load)]
    return [float(x) for x in g["request_throughput_rps"].dropna()]


def scaling(arms: dict, ranked: pd.DataFrame, maps: dict, confidence: float) -> list[dict]:
    """Per N-replica arm against the one-replica arm of the same engine kind: the measured ratio at
    the heaviest load both ranked, beside MVA's on the measured centres. The prediction takes the
    one replica's centres with its compute's m times N and the deployment's router centre added,
    against those centres as they are (what the map says adding replicas buys); the deployment's own
    centres predict its throughput, held against the measured one."""
    ones = [n for n, a in arms.items() if a["arm"].replicas == 1 and getattr(a["arm"], "router", None) is None]
    out = []
    for name, a in arms.items():
        if a["arm"].replicas < 2:
            continue
        for one in ones:
            if arms[one]["arm"].engine.kind != a["arm"].engine.kind:
                continue
            both = sorted(
                set(ranked.loc[ranked["arm"] == name, "load"]) & set(ranked.loc[ranked["arm"] == one, "load"])
            )
            if not both:
                continue
            load = float(both[-1])
            n_clients = int(load)
            base, many = maps.get(one), maps.get(name)
            single, deployed = _layers(base), _layers(many)
            pred_one = pred_many = own = None
            if single:
                delay = base.unattributed_ms or 0.0
                pred_one = mva_on_centres(single, n_clients, delay)[-1]["throughput_rps"]
                router = [c for c in deployed if c.name == ROUTER_CENTRE]
                scaled = [Layer(c.name, c.visits, c.service_ms, c.capacity * a["arm"].replicas, c.why_m, c.source)
                          if c.name == "engine compute" else c for c in single] + router
                pred_many = mva_on_centres(scaled, n_clients, delay)[-1]["throughput_rps"]
            if deployed:
                own = mva_on_centres(deployed, n_clients, many.unattributed_ms or 0.0)[-1]["throughput_rps"]
            row = two_over_one(_throughputs(one, ranked, load), _throughputs(name, ranked, load), pred_many, pred_one,
                               a["arm"].replicas, confidence)
            measured = row["measured_many_rps"]
            out.append({"arm": name, "one_replica_arm": one, "load": load, **row,
                        "mva_own_centres_rps": own,
                        "mva_own_error_pct": 100 * (own - measured) / measured if own and measured else None})
    return out


def routing_findings(arms: dict, ranked: pd.DataFrame, maps: dict, confidence: float) -> dict:
    """analysis.json's `routing`; empty for a campaign with no replicas behind a router."""
    routed = [n for n, a in arms.items() if getattr(a["arm"], "router", None) is not None]
    if not routed or ranked.empty:
        return {}
    per_arm = [r for n in routed for r in routing_rows(n, ranked, a_points(arms[n]))]
    policies = []
    for aff, bal in policy_pairs(arms):
        found = crossover(pooled_tails(aff, ranked, arms[aff].get("requests"), confidence),
                          pooled_tails(bal, ranked, arms[bal].get("requests"), confidence), (aff, bal))
        found["hotspot"] = hotspots({r["load"]: r["imbalance_by_repetition"] for r in per_arm if r["arm"] == aff},
                                    confidence)
        found["hotspot_balanced"] = hotspots({r["load"]: r["imbalance_by_repetition"] for r in per_arm
                                              if r["arm"] == bal}, confidence)
        policies.append(found)
    return {"figure": f"TTFT p{QUANTILE * 100:g} of the pooled requests", "per_arm": per_arm, "policies": policies,
            "scaling": scaling(arms, ranked, maps, confidence)}


def a_points(arm: dict) -> dict:
    return ((arm.get("results") or {}).get("sweep") or {}).get("points") or {}


def first_screen_lines(routing: dict) -> list[str]:
    """The routing findings in a few sentences for the report's first screen."""
    if not routing:
        return []
    lines = []
    for p in routing.get("policies") or []:
        lines.append(p["text"] + ".")
        hot = p["hotspot"]
        said = "; ".join(f"{r['load']:g}: {r['mean']:.2f} ({r['min']:.2f}-{r['max']:.2f})" for r in hot["per_load"])
        loads = hot.get("hotspot_loads") or []
        where = (f"a hotspot at load {', '.join(f'{x:g}' for x in loads)}" if loads else "no hotspot at any load")
        lines.append(f"{p['arms'][0]}'s imbalance (busiest replica over the mean, over repetitions) by load: {said}; "
                     f"{where} (every repetition at or above {hot['threshold']:g}).")
    for r in routing.get("per_arm") or []:
        shares = "/".join(f"{s:.0%}" for s in r["request_shares"] if s is not None)
        hit = (f"prefix hits {r['realized_hit_rate']:.0%} realized against {r['implied_hit_rate']:.0%} implied"
               if r["realized_hit_rate"] is not None and r["implied_hit_rate"] is not None else "")
        cpu = (f", router {r['router_cpu_ms_per_request']:.2f} ms CPU per request"
               if r["router_cpu_ms_per_request"] is not None else "")
        lines.append(f"{r['arm']} at load {r['load']:g}: shares {shares} (busiest first), "
                     f"imbalance {r['imbalance']:.2f}, {hit}{cpu}.")
    for s in routing.get("scaling") or []:
        if s["ratio"] is None:
            continue
        pred = f"; MVA on the measured centres predicts {s['predicted_ratio']:.2f}x" if s["predicted_ratio"] else ""
        lines.append(f"Does {s['replicas']} give {s['replicas']}x? {s['arm']} over {s['one_replica_arm']} at load "
                     f"{s['load']:g}: {s['ratio']:.2f}x measured throughput ({s['scales']}){pred}.")
    return lines


def _tail_words(p: dict) -> str:
    bal = p["arms"][1]
    if p["status"] == "crossed":
        lo, hi = p["between"]
        return (f"Its {p['figure']} stops being lower than {bal}'s near load {p['at_load']:.3g} "
                f"(between {lo:g} and {hi:g})")
    if p["status"] == "no crossing":
        return f"Its {p['figure']} stays lower than {bal}'s up to load {p['up_to']:g}, the heaviest swept"
    if p["status"] == "never ahead":
        return f"Its {p['figure']} is not lower than {bal}'s even at the lightest load"
    return f"Its {p['figure']} was not measured against {bal}'s"


def _hotspot_words(hot: dict) -> str:
    per = {r["load"]: r["mean"] for r in hot["per_load"]}
    at = hot.get("hotspot_loads") or []
    rest = [f"{load:g} ({m:.2f})" for load, m in per.items() if load not in at]
    if not at:
        return f"no hotspot at any load (busiest replica over the mean: {', '.join(rest)})"
    return (f"a hotspot at load {', '.join(f'{x:g} ({per[x]:.2f})' for x in at)}, the busiest replica at least "
            f"{hot['threshold']:g}x the mean in every repetition" + (f", not at {', '.join(rest)}" if rest else ""))


def policy_answer(analysis: dict, primary: str, figure: str) -> str | None:
    """The answer block's routing line: per pair of policies, the primary figure's decision per load,
    where the affinity policy's tail stops being lower, and where it makes a hotspot."""
    lines = []
    for p in (analysis.get("routing") or {}).get("policies") or []:
        aff, bal = p["arms"]
        said = [f"at {d['load']:g} {d['text'].rstrip('.')}" for d in sorted(
            (d for d in analysis.get("decisions") or [] if d.get("metric") == primary
             and {d.get("arm_a"), d.get("arm_b")} == {aff, bal}), key=lambda d: d["load"])]
        lines.append(f"{aff} against {bal} on {figure}: {'; '.join(said) or 'not compared'}. "
                     f"{_tail_words(p)}; {_hotspot_words(p['hotspot'])}.")
    return " ".join(lines) or None


def deployment_table(routing: dict) -> pd.DataFrame:
    """Per routed arm and load: shares, imbalance, prefix hits realized against implied, the router."""
    rows = [{"arm": r["arm"], "load": r["load"], "policy": r["policy"], "repetitions": r["repetitions"],
             "request shares (busiest first)": " / ".join(f"{s:.0%}" for s in r["request_shares"] if s is not None),
             "imbalance (max/mean)": r["imbalance"], "prefix hits realized": r["realized_hit_rate"],
             "prefix hits implied": r["implied_hit_rate"],
             "router CPU (ms/request)": r["router_cpu_ms_per_request"], "router retries": r["router_retries"],
             "router added (ms, idle)": r["router_added_ms_idle"]} for r in routing.get("per_arm") or []]
    return pd.DataFrame(rows)


def crossover_table(routing: dict) -> pd.DataFrame:
    """Per policy pair and load: each tail with its interval, the difference's bracket, the order."""
    rows = [{"arms": " vs ".join(p["arms"]), "load": r["load"],
             f"{p['arms'][0]} {p['figure']} (ms)": Tail(**r["affinity"]).text(),
             f"{p['arms'][1]} {p['figure']} (ms)": Tail(**r["balanced"]).text(),
             "difference (ms)": r["difference_ms"], "difference at least (ms)": r["difference_lo_ms"],
             "difference at most (ms)": r["difference_hi_ms"], "ordered": r["ordered"]}
            for p in routing.get("policies") or [] for r in p["per_load"]]
    return pd.DataFrame(rows)
