"""The capacity step of 30_load_sweep: in each repetition the notebook measures, search the arm's
highest concurrency inside the SLO on the engine that repetition started, and write every
round to results.json's `capacity` section; the tables the notebook shows."""
from __future__ import annotations

import pandas as pd
from tqdm import tqdm

from stackbook.analysis.tables import column_title
from stackbook.capacity.engine_probe import EngineProbe
from stackbook.capacity.probing import CapacityInterval
from stackbook.capacity.search import search_capacity
from stackbook.evidence.capacity_record import CapacityResults, ProbeRecord, SearchRound
from stackbook.evidence.files import read_json, update_results
from stackbook.loadgen.records import RecordWriter
from stackbook.measure.metric_definitions import columns


def earlier_rounds(session) -> dict[str, dict]:
    return ((read_json(session.arm_dir.results, {}) or {}).get("capacity") or {}).get("rounds") or {}


def search_round(interval: CapacityInterval, figures: dict[str, dict]) -> SearchRound:
    """The round's record: each probe in order beside the figures its verdict came from."""
    names = list(figures)
    probes = [ProbeRecord(point=name, load=v.load, verdict=v.verdict, reason=v.reason, requests=v.requests,
                          met=v.met, duration_s=round(v.duration_s, 3),
                          **{k: x for k, x in figures[name].items()
                             if k not in ("verdict", "reason", "requests", "met")})
              for name, v in zip(names, interval.probes)]
    return SearchRound(lower=interval.lower, upper=interval.upper, resolved=interval.resolved,
                       stop_reason=interval.stop_reason, undecided=list(interval.undecided),
                       requests=interval.requests, duration_s=round(interval.duration_s, 3), probes=probes)


def arm_capacity(session, run_id: str | None = None, repetitions: list[int] | None = None,
                 progress: bool = True) -> dict | None:
    """Run the search in each given repetition not searched yet (None: the protocol's minimum);
    None when the protocol asks for no search."""
    from stackbook.measure.sweep import tokenizer_for

    protocol = session.protocol
    if protocol.capacity is None:
        return None
    reps = list(range(protocol.repetitions.min)) if repetitions is None else sorted(repetitions)
    rounds = earlier_rounds(session)
    plan = protocol.capacity.plan()
    tokenizer = tokenizer_for(session)
    for rep in reps:
        if str(rep) in rounds:
            continue
        bar = tqdm(desc=f"{session.arm.name} capacity search, repetition {rep}", unit="req", disable=not progress)
        with RecordWriter(session.arm_dir.capacity_requests) as writer:
            probe = EngineProbe(session, rep, writer, tokenizer, run_id or session.run_dir.name, bar)
            interval = search_capacity(probe, plan)
        bar.close()
        rounds[str(rep)] = search_round(interval, probe.figures).model_dump()
        out = capacity_section(protocol, rounds)
        update_results(session.arm_dir, "capacity", out)
    return capacity_section(protocol, rounds)


def capacity_section(protocol, rounds: dict) -> dict:
    return CapacityResults(plan=protocol.capacity.model_dump(), target=protocol.slo.attainment,
                           slo=protocol.slo.model_dump(), rounds=rounds).model_dump()


def rounds_table(capacity: dict) -> pd.DataFrame:
    """One row per repetition: the interval, its resolution, probes, requests and time."""
    rows = []
    for rep, r in capacity["rounds"].items():
        r = SearchRound.model_validate(r)
        rows.append({"repetition": int(rep), "highest proven inside": r.lower, "lowest proven outside": r.upper,
                     "resolved": r.resolved, "probes": len(r.probes), "requests": r.requests,
                     "probing time (s)": r.duration_s, "why it stopped": r.stop_reason})
    return pd.DataFrame(rows).set_index("repetition") if rows else pd.DataFrame()


def probes_table(capacity: dict) -> pd.DataFrame:
    """Every probe in the order it ran, with the figures its verdict was read from."""
    rows = []
    for rep, r in capacity["rounds"].items():
        for p in SearchRound.model_validate(r).probes:
            d = p.model_dump()
            rows.append({"repetition": int(rep), "probe": d["point"], "concurrency": d["load"],
                         "verdict": d["verdict"], "met / requests": f"{d['met']}/{d['requests']}",
                         "load held": d.get("load_held"), "in flight": d.get("in_flight_mean"),
                         **{column_title(c): d.get(c) for c in columns(("ttft_ms", "p99"), ("tpot_ms", "p99"))},
                         "output tok/s": d.get("output_throughput_tok_s"), "seconds": d["duration_s"],
                         "reason": d["reason"]})
    return pd.DataFrame(rows)
