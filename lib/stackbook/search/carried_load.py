"""The load a search is measured at when it asks for `concurrency: carried`: the highest
closed-loop concurrency the incumbent is proven to carry inside the SLO, found by the campaign's
own capacity search (its `protocol.capacity` plan, its SLO and attainment) on one engine start of
the incumbent, before the first step.

Why: at a load the incumbent cannot carry, every configuration's goodput inside the SLO is near
zero, so a gain is a ratio over nothing and no interval can be built; at the load it carries the
search asks the question a user has, what carries that load with more to spare. The answer is
kept in `carried_load.json` (with every probe) and read back when the search resumes.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from stackbook.capacity.search import search_capacity
from stackbook.engines.knobs import Value
from stackbook.evidence.rundir import RunDir
from stackbook.search.engine_probe import engine_probe

if TYPE_CHECKING:
    from stackbook.search.engine_system import EngineSystem

CARRIED_JSON = "carried_load.json"


class NothingCarried(RuntimeError):
    """The incumbent is proven inside the SLO at no load: there is nothing to search from."""


def read_carried(folder: Path) -> dict | None:
    """The carried load found earlier in this search's folder, or None."""
    path = folder / CARRIED_JSON
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def carried_load(system: EngineSystem, incumbent: dict[str, Value], folder: Path, seed: int) -> int:
    """The highest concurrency the incumbent is proven to carry (the capacity interval's lower
    end); probes already in the folder are judged from their records, not sent again."""
    found = read_carried(folder)
    if found is not None:
        return int(found["concurrency"])
    protocol = system.base.protocol_for(system.base_arm)
    plan = protocol.capacity.plan()
    with engine_probe(system, incumbent, RunDir(folder / "measurements" / f"carried-s{seed}"), seed) as probe:
        interval = search_capacity(probe, plan)
    probes = [{"concurrency": int(v.load), "verdict": v.verdict, "met": v.met, "requests": v.requests,
               "reason": v.reason} for v in interval.probes]
    if interval.lower is None:
        raise NothingCarried(
            f"the incumbent is proven inside the SLO at no concurrency ({interval.stop_reason}; probes: "
            + ", ".join(f"{p['concurrency']} {p['verdict']} {p['met']}/{p['requests']}" for p in probes)
            + "): loosen the campaign's protocol.slo, or name system.concurrency to search at a load anyway")
    out = {"concurrency": int(interval.lower), "upper": interval.upper, "resolved": interval.resolved,
           "stop_reason": interval.stop_reason, "attainment": protocol.slo.attainment, "probes": probes}
    (folder / CARRIED_JSON).write_text(json.dumps(out, indent=1), encoding="utf-8")
    return out["concurrency"]


def carried_words(found: dict) -> str:
    """One sentence for the report: the load searched at and how it was found."""
    upper = "none proven outside" if found["upper"] is None else f"{found['upper']:g} proven outside"
    return (f"Measured at {found['concurrency']} closed-loop clients: the highest load the incumbent was proven "
            f"to carry inside the SLO ({found['attainment']:.0%} of requests) by the campaign's capacity search "
            f"({upper}; {len(found['probes'])} probes; {found['stop_reason']}).")
