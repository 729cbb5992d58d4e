"""The load a configuration carries: the highest closed-loop concurrency it is proven to carry
inside the SLO, found by the campaign's own capacity search (its `protocol.capacity` plan, its SLO
and attainment) on one engine start of that configuration, with the cost per million output
tokens there at the campaign's price.

Why: a search that asks for `concurrency: carried` is measured at the incumbent's carried load,
found before the first step. At a load the incumbent cannot carry every configuration's goodput
inside the SLO is near zero, so a gain is a ratio over nothing and no interval can be built; at
the load it carries the search asks the question a user has, what carries it with more to spare.
The search's report then gives the default's and the final configuration's capacity and cost.
Each answer is kept under `capacity/` (with every probe) and read back when the search resumes.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from stackbook.capacity.predictions import cost_per_m_output_tokens
from stackbook.capacity.search import search_capacity
from stackbook.engines.knobs import Value
from stackbook.evidence.rundir import RunDir
from stackbook.search.engine_probe import config_digest, engine_probe

if TYPE_CHECKING:
    from stackbook.search.engine_system import EngineSystem

CARRIED_JSON = "carried_load.json"  # the incumbent's, beside the search's record


class NothingCarried(RuntimeError):
    """The incumbent is proven inside the SLO at no load: there is nothing to search from."""


def read_carried(folder: Path) -> dict | None:
    """The incumbent's carried load found earlier in this search's folder, or None."""
    path = folder / CARRIED_JSON
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def capacity_of(system: EngineSystem, config: dict[str, Value], folder: Path, seed: int) -> dict:
    """The configuration's capacity interval, its probes, and the output tokens per second and
    cost per million output tokens at the highest load proven inside; probes already in the
    folder are judged from their records, not sent again."""
    name = f"{config_digest(config)}-s{seed}"
    path = folder / "capacity" / f"{name}.json"
    if path.exists():
        return json.loads(path.read_text(encoding="utf-8"))
    protocol = system.base.protocol_for(system.base_arm)
    run = RunDir(folder / "measurements" / f"capacity-{name}")
    with engine_probe(system, config, run, seed) as probe:
        interval = search_capacity(probe, protocol.capacity.plan())
        figures = probe.figures
    probes = [{"concurrency": int(v.load), "verdict": v.verdict, "met": v.met, "requests": v.requests,
               "reason": v.reason} for v in interval.probes]
    at = [f for f in figures.values() if interval.lower is not None and f.get("concurrency") == interval.lower
          and f.get("verdict") == "inside"]
    tok_s = at[-1].get("output_throughput_tok_s") if at else None
    cost = system.base.cost
    out = {"configuration": config, "concurrency": None if interval.lower is None else int(interval.lower),
           "upper": interval.upper, "resolved": interval.resolved, "stop_reason": interval.stop_reason,
           "attainment": protocol.slo.attainment, "probes": probes, "output_tok_s": tok_s,
           "hardware_hour_usd": cost.hardware_hour_usd if cost else None,
           "cost_per_m_output_tokens_usd": cost_per_m_output_tokens(cost.hardware_hour_usd, tok_s) if cost else None}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1), encoding="utf-8")
    return out


def carried_load(system: EngineSystem, incumbent: dict[str, Value], folder: Path, seed: int) -> int:
    """The highest concurrency the incumbent is proven to carry (its capacity interval's lower end)."""
    found = read_carried(folder) or capacity_of(system, incumbent, folder, seed)
    if found["concurrency"] is None:
        raise NothingCarried(
            f"the incumbent is proven inside the SLO at no concurrency ({found['stop_reason']}; probes: "
            + ", ".join(f"{p['concurrency']} {p['verdict']} {p['met']}/{p['requests']}" for p in found["probes"])
            + "): loosen the campaign's protocol.slo, or name system.concurrency to search at a load anyway")
    (folder / CARRIED_JSON).write_text(json.dumps(found, indent=1), encoding="utf-8")
    return found["concurrency"]


def _clients(n: int) -> str:
    return f"{n} client{'' if n == 1 else 's'}"


def carried_words(found: dict) -> str:
    """One sentence for the report: the load searched at and how it was found."""
    upper = "none proven outside" if found["upper"] is None else f"{found['upper']:g} proven outside"
    return (f"Measured at {_clients(found['concurrency'])} in a closed loop: the highest load the incumbent was proven "
            f"to carry inside the SLO ({found['attainment']:.0%} of requests) by the campaign's capacity search "
            f"({upper}; {len(found['probes'])} probes; {found['stop_reason']}).")


def capacity_words(found: dict) -> str:
    """A configuration's capacity and cost, as the report's final section gives them."""
    if found["concurrency"] is None:
        return f"capacity inside the SLO: none proven ({found['stop_reason']})"
    upper = "none proven outside" if found["upper"] is None else f"{found['upper']:g} proven outside"
    out = f"capacity inside the SLO: {_clients(found['concurrency'])} ({upper})"
    if found.get("output_tok_s"):
        out += f", {found['output_tok_s']:,.1f} output tok/s there"
    if found.get("cost_per_m_output_tokens_usd") is not None:
        out += (f"; ${found['cost_per_m_output_tokens_usd']:.2f} per million output tokens at "
                f"${found['hardware_hour_usd']:g} an hour, streaming at that load all hour")
    return out
