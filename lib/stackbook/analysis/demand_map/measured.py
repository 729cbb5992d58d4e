"""An arm's measured demand map from its results: the highest-load valid point's centres, the
bound beside the throughput measured over the same CPU window, the busy fractions that explain
the gap, the map's validity, the MVA check and the next experiments."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from stackbook.analysis.demand_map.centres import point_centres, point_counts
from stackbook.analysis.demand_map.experiments import (
    E2E_MEAN,
    closed_loop_points,
    demand_ci,
    mva_check,
    next_experiments,
    predicted_response_ms,
    unattributed_ms,
)
from stackbook.analysis.demand_map.layers import Layer, demand_map
from stackbook.analysis.demand_map.load_model import (
    PointLoad,
    own_point_error_pct,
    own_point_refusal,
    point_load,
)
from stackbook.analysis.fairness import fairness_table
from stackbook.analysis.run_data import arm_labels, load_run
from stackbook.measure.runtime import waiting_mean


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
    status: str = Field(description="'measured', 'invalid: <which assumption broke>' or 'not measured: <why>'")
    point: str | None = None
    point_rule: str = ("demands from the highest-load valid point (not discarded, load valid): the "
                       "saturation regime the bound speaks about")
    load: float | None = None
    centres: list[CentreRow] = Field(default_factory=list)
    bottleneck: str | None = None
    bound_rps: float | None = None
    offered_load: str | None = Field(None, description="the demand point's load as the protocol set it")
    bound_interval: float | None = Field(None, description="the bound's relative interval: the bottleneck's D/m "
                                         "95% CI over repetitions, else MAP_TOLERANCE")
    busy_fractions: dict[str, float] = Field(default_factory=dict, description="per centre, busy share of the "
                                             "demand point's CPU window: throughput x D / m")
    measured_saturation_rps: float | None = Field(None, description="the highest valid throughput, each point "
                                                  "over its own CPU window (the demands' window)")
    saturation_point: str | None = None
    measured_over_bound: float | None = Field(None, description="measured_saturation_rps / bound_rps")
    above_bound: str | None = Field(None, description="where the measured saturation exceeds the bound: 'within its "
                                    "interval' or 'beyond its interval' (then the map is invalid); None where not")
    bound_exceeded: str | None = Field(None, description="the same in a sentence, the interval in req/s")
    why_not_closer: str | None = None
    unattributed_ms: float | None = Field(None, description="light-load response not owned by any centre")
    batch_size_mean: float | None = None
    engine_time_ms: dict[str, Any] | None = None
    slot_loop: dict[str, Any] | None = Field(None, description="the demand point's loop by the engine's clock: "
                                             "the runtime's seconds inside the compute centre (measure.slot_loop)")
    spec_decode: Any = None
    startup_s: float | None = Field(None, description="engine start-up (ready_after_s), apart from steady state")
    mva_check: list[dict[str, Any]] = Field(default_factory=list)
    load_model: str | None = Field(None, description="the network that predicts the response at the demand point: "
                                   "closed (clients, or a replayed log's sessions) or open (an offered rate)")
    own_point_e2e_ms: float | None = Field(None, description="that network's mean E2E at the demand point itself")
    own_point_error_pct: float | None = Field(None, description="its error there against the measured mean E2E; "
                                              "beyond OWN_POINT_TOLERANCE nothing is ranked")
    next_experiments: list[dict[str, Any]] = Field(default_factory=list)
    next_experiments_note: str | None = Field(None, description="why no candidate is listed, when none is")

    @property
    def measured(self) -> bool:
        return self.status == "measured"

    def layers(self) -> list[Layer]:
        return [Layer(c.centre, c.visits, c.service_ms, c.capacity, c.why_m, c.source) for c in self.centres]


def _rows(centres: list[Layer]) -> list[CentreRow]:
    return [CentreRow(centre=c.name, visits=round(c.visits, 6), service_ms=round(c.service_ms, 6),
                      demand_ms=round(c.demand_ms, 6), capacity=c.capacity, adjusted_ms=round(c.adjusted_ms, 6),
                      why_m=c.why_m, source=c.source) for c in centres]


# A map whose measured throughput exceeds its bound by more than the bound's interval is invalid;
# with one reading at the load (no repetitions, no interval) this share stands in for it.
MAP_TOLERANCE = 0.05
QUEUE_SHARE = 0.05  # a queue wait of at least 5% of the request time is the engine's queue at work


def window_throughput(p: dict) -> float | None:
    """Requests per second over the point's CPU window: the window its demands come from, so the
    bound and the throughput set beside it share one window (runs recorded before the window was
    read: the measured window's throughput)."""
    if p.get("requests_in_cpu_window") and p.get("cpu_window_s"):
        return p["requests_in_cpu_window"] / p["cpu_window_s"]
    return p.get("request_throughput_rps")


def saturation(sweep: dict) -> tuple[str | None, float | None]:
    """The highest request throughput among valid points (discarded or invalid never count), each
    over its own CPU window."""
    best = [(window_throughput(p), n) for n, p in sweep.get("points", {}).items()
            if point_counts(n, p, sweep) and window_throughput(p)]
    if not best:
        return None, None
    x, n = max(best)
    return n, x


def busy_fractions(centres: list[Layer], throughput_rps: float) -> dict[str, float]:
    """Each centre's measured busy fraction over the window: throughput x D / m (the utilisation
    law; D = busy seconds / requests in the same window, so this is busy seconds / (window x m))."""
    return {c.name: throughput_rps * c.adjusted_ms / 1000 for c in centres}


def engine_queue(point: dict) -> tuple[float | None, float | None]:
    """What the engine itself says of its queue over a point: the mean time a request spent in it
    (ms, from its queue histogram) and the mean number waiting (its gauge), each None when the
    engine exports no such counter."""
    waiting = point["waiting_mean"] if "waiting_mean" in point else waiting_mean(point.get("engine_gauges_during"))
    return (point.get("engine_time_ms") or {}).get("queue"), waiting


def queue_owner(batch: float, in_flight: float, queue_ms: float | None, waiting: float | None,
                e2e_ms: float | None) -> str:
    """Who owned the requests in flight that the engine's batch did not hold: its queue where its own
    counters show one (a wait of at least QUEUE_SHARE of the request time, or a tenth of a request
    waiting on average), not its queue where they read none, and "likely" where it exports none."""
    gap = f"it ran {batch:.1f} requests at a time on average while {in_flight:.2f} were in flight"
    if queue_ms is None and waiting is None:
        return (f"likely the engine's queue: {gap}, so the rest waited without adding to the batch (the engine "
                "exports no queue counter to confirm it)")
    def ms(x: float) -> str:
        return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"

    said = " and ".join(x for x in (f"{ms(queue_ms)} ms in its queue per request" if queue_ms is not None else "",
                                    f"{waiting:.2g} requests waiting on average" if waiting is not None else "") if x)
    queued = ((queue_ms is not None and e2e_ms and queue_ms >= QUEUE_SHARE * e2e_ms)
              or (waiting is not None and waiting >= 0.1))
    if queued:
        return f"the engine's queue: {gap}, and its own counters read {said}"
    return (f"not the engine's queue, whose own counters read {said} although {gap}; who held the rest is "
            "unknown from these counters (between the engine's batch steps, or in the client's hands; the batch "
            "gauge is sampled once a second and can miss short batches)")


def why_not_closer(bottleneck: str, busy: dict[str, float], point: str, batch: float | None,
                   in_flight: float | None, offered: str, queue: tuple[float | None, float | None] = (None, None),
                   e2e_ms: float | None = None) -> str:
    """The bottleneck's busy fraction, measured over the point's CPU window, and when it stood idle
    who most likely owned that time. `offered` names the load as the protocol set it; `queue` is
    what the engine's own counters say of its queue (engine_queue)."""
    u = busy[bottleneck]
    if u >= 0.95:
        return (f"At {point} ({offered}) the {bottleneck} centre was busy {u:.0%} of the point's CPU window: only "
                "cutting its demand (or adding to its m) raises throughput.")
    others = sorted(((n, b) for n, b in busy.items() if n != bottleneck), key=lambda x: -x[1])
    reason = []
    if batch is not None and in_flight and batch < 0.9 * in_flight:
        reason.append(queue_owner(batch, in_flight, *queue, e2e_ms))
    if others and others[0][1] > 0.3 * u:
        reason.append(f"the {others[0][0]} centre (busy {others[0][1]:.0%}) hands work to it in turn, and the two "
                      "share the host's cores")
    if in_flight is not None and in_flight < 1 and not reason:
        reason.append(f"the load itself: {in_flight:.2f} requests were in flight on average, so the engine often "
                      "had nothing to do")
    if not reason:
        reason.append("none of the counters here (waits between engine steps, the client's gaps between a reply "
                      "and the next send)")
    return (f"At {point} ({offered}) the {bottleneck} centre was busy {u:.0%} of the point's CPU window, idle "
            f"{1 - u:.0%}; the likely owner of that time: " + "; ".join(reason) + ".")


def broken_assumption(bottleneck: str, busy: dict[str, float], centres: list[Layer], point: str,
                      sat_point: str | None) -> str:
    """Why a measured throughput can exceed the bound: which of the map's assumptions broke."""
    u = busy[bottleneck]
    m = next(c.capacity for c in centres if c.name == bottleneck)
    if u > 1 + MAP_TOLERANCE:
        return (f"overlapping CPU seconds: the {bottleneck} process was busy {u * m:.2f} cores over the window against "
                f"m = {m:g}, so it ran more threads than its m states (its m, or the "
                f"process it is read from, is wrong)")
    return (f"the demands measured at {point} do not hold at {sat_point}, which went faster: the work per request "
            "differs between the points (batching, request lengths, cache hits), or a centre that did part of the "
            "work there is missing from the map")


def above_bound(sat: float, sat_point: str, bound: float, interval: float, from_repetitions: bool,
                point: str) -> tuple[str, str] | None:
    """Where the measured saturation throughput exceeds the bound: whether beyond the bound's
    interval, and a sentence with that interval in req/s; None where it does not exceed it."""
    ratio = sat / bound
    if ratio <= 1:
        return None
    where = "beyond its interval" if ratio > 1 + interval else "within its interval"
    basis = ("the bottleneck's D/m 95% CI over the repetitions at that load" if from_repetitions
             else f"the {MAP_TOLERANCE:.0%} a single reading allows")
    said = (f"measured {sat:.3g} req/s at {sat_point} is {ratio:.2f}x the bound {bound:.3g} req/s from {point}: above "
            f"it, {where} ({bound * (1 - interval):.3g} to {bound * (1 + interval):.3g} req/s, ±{interval:.1%}: "
            f"{basis})")
    if where == "within its interval":
        said += ("; the bound is not refuted, but its value is no ceiling: the demands per request at "
                 f"{point} were higher than at {sat_point}")
    return where, said


def measured_demand_map(arm: str, results: dict, engine: dict | None = None, log_text: str = "",
                        label: str = "accepted", risk_cost: dict | None = None, slo: dict | None = None,
                        arrival: dict | None = None) -> ArmDemandMap:
    """An arm's demand map from its results.json: the highest-load valid point's centres, the
    bound beside the throughput over the same CPU window (a throughput above it flagged), the busy
    fractions, the MVA check and the next experiments; a map whose measured throughput exceeds its
    bound by more than its interval is invalid and ranks nothing. `arrival` is the protocol's
    arrival pattern (the passport's): it says whether a replayed log ran as closed sessions."""
    engine = engine or {}
    sweep = results.get("sweep") or {}
    if label != "accepted":
        return ArmDemandMap(arm=arm, status=f"not measured: the arm is {label}; its points never count")
    if not sweep.get("points"):
        return ArmDemandMap(arm=arm, status="not measured: the arm has no sweep")
    valid = {n: p for n, p in sweep["points"].items() if point_counts(n, p, sweep)}
    usable = {n: p for n, p in valid.items() if point_centres(p, engine, log_text)}
    if not usable:
        why = ("its results.json predates the per-point runtime evidence (cpu_seconds, requests_in_cpu_window); "
               "rerun the campaign to measure it") if not any("cpu_seconds" in p for p in sweep["points"].values()) \
            else "no point is valid and undiscarded" if not valid \
            else ("no valid point carries the engine's CPU readings or its own busy time (a remote endpoint, "
                  "or an engine without counters)")
        return ArmDemandMap(arm=arm, status=f"not measured: {why}", startup_s=engine.get("ready_after_s"))
    name, point = max(usable.items(), key=lambda kv: (kv[1].get("load") or 0, kv[0]))
    centres = point_centres(point, engine, log_text)
    m = demand_map(centres)
    bound = m["throughput_bound_rps"]
    busy = busy_fractions(centres, window_throughput(point))
    sat_point, sat = saturation(sweep)
    ci = demand_ci(sweep, name, engine, log_text)
    half = ci.get(m["bottleneck"])
    from_repetitions = half is not None and half == half
    interval = half / next(c.adjusted_ms for c in centres if c.name == m["bottleneck"]) if from_repetitions \
        else MAP_TOLERANCE
    util = sat / bound if sat else None
    in_flight = point.get("engine_in_flight_mean", point.get("in_flight_mean"))
    load = point_load(point, arrival)
    out = ArmDemandMap(
        arm=arm, status="measured", point=name, load=point.get("load"), offered_load=load.words,
        centres=_rows(centres), bottleneck=m["bottleneck"], bound_rps=bound, bound_interval=interval,
        measured_saturation_rps=sat, saturation_point=sat_point, measured_over_bound=util,
        busy_fractions={k: round(v, 4) for k, v in busy.items()},
        why_not_closer=why_not_closer(m["bottleneck"], busy, name, point.get("batch_size_mean"), in_flight,
                                      load.words, engine_queue(point), point.get(E2E_MEAN)),
        batch_size_mean=point.get("batch_size_mean"), engine_time_ms=point.get("engine_time_ms"),
        slot_loop=point.get("slot_loop"), spec_decode=point.get("spec_decode"), startup_s=engine.get("ready_after_s"),
        load_model=load.model)
    over = above_bound(sat, sat_point, bound, interval, from_repetitions, name) if sat else None
    if over:
        out.above_bound, out.bound_exceeded = over
    if util is not None and util > 1 + interval:
        out.status = (f"invalid: measured {sat:.3g} req/s at {sat_point} is {util:.2f}x the bound {bound:.3g} req/s, "
                      f"beyond its interval (±{interval:.0%}): "
                      + broken_assumption(m["bottleneck"], busy, centres, name, sat_point) + "; it ranks nothing")
        return out
    closed = closed_loop_points(sweep)
    light = min(closed, key=lambda p: p["concurrency"]) if closed else None
    out.unattributed_ms = unattributed_ms(point_centres(light["summary"], engine, log_text), light["e2e_ms"]) \
        if light else None
    out.mva_check = mva_check(closed, engine, log_text)
    # The delay that makes these centres' model exact at the lightest load, as mva_check's own
    # rows use it: the rows and the ranking are one model.
    delay = unattributed_ms(centres, light["e2e_ms"]) if light else 0.0
    rank_next(out, centres, delay, load, point, ci, risk_cost, e2e_slo_ms(slo, point))
    return out


def rank_next(out: ArmDemandMap, centres: list[Layer], delay: float, load: PointLoad, point: dict, ci: dict,
              risk_cost: dict | None, limit: float | None) -> None:
    """The next experiments, from the network the point's load calls for (load_model.point_load),
    once that network has been set against its own point: an open loop at the rate offered, never
    at its throughput (past capacity a throughput hides the queue that makes the response infinite);
    a replayed log's sessions as the closed loop they are. A model that misses its own point beyond
    OWN_POINT_TOLERANCE ranks nothing, and says so."""
    if not load.predicts:
        out.next_experiments_note = f"no candidate is ranked: no network predicts this point ({load.model})"
        return
    predicted = predicted_response_ms(centres, delay, load.population, load.rate_rps)
    measured = point.get(E2E_MEAN)
    out.own_point_error_pct = own_point_error_pct(predicted, measured)
    out.own_point_e2e_ms = predicted if out.own_point_error_pct is not None else None
    refusal = own_point_refusal(out.own_point_error_pct, predicted, measured or 0.0, out.point)
    if refusal:
        out.next_experiments_note = refusal
        return
    out.next_experiments = next_experiments(centres, load.population, delay, ci, risk_cost, rate_rps=load.rate_rps,
                                            e2e_slo_ms=limit)
    if not out.next_experiments:
        out.next_experiments_note = (f"no candidate keeps the predicted mean E2E inside the SLO ({limit:,.0f} ms) at "
                                     f"{load.words}: {load.lighter()}")


def e2e_slo_ms(slo: dict | None, point: dict) -> float | None:
    """The mean E2E the SLO allows at this point: its own E2E bound, else TTFT + TPOT x (the point's
    mean output length - 1); None without an SLO."""
    if not slo:
        return None
    if slo.get("e2e_ms"):
        return float(slo["e2e_ms"])
    n = (point.get("output_tokens") or 0) / max(1, point.get("completed") or 1)
    return slo["ttft_ms"] + slo["tpot_ms"] * max(0.0, n - 1) if n else None


def measured_demand_maps(run_dir, risk_cost: dict | None = None) -> dict[str, ArmDemandMap]:
    """Every arm of a run: its measured demand map (or why it is not measured)."""
    campaign, arms = load_run(run_dir)
    return demand_maps_of(arms, arm_labels(arms, fairness_table(campaign, arms)), risk_cost)


def demand_maps_of(arms: dict, labels: dict, risk_cost: dict | None = None) -> dict[str, ArmDemandMap]:
    """The same from arms already loaded (`run_data.load_run`) and their labels."""
    out = {}
    for name, a in arms.items():
        log = a["dir"].engine_log
        text = log.read_text(errors="replace") if log.exists() else ""
        label = getattr(labels[name], "value", labels[name])
        protocol = (a.get("passport") or {}).get("protocol", {})
        out[name] = measured_demand_map(name, a["results"], a["engine"], text, label, risk_cost, protocol.get("slo"),
                                        protocol.get("arrival"))
    return out
