"""The harness's ceiling for a run: a short open-loop rate ladder against the calibration server
at campaign start (seconds), recorded in the manifest with the host, and kept per host in the
cache so `run --check` can warn about a rate above the ceiling last measured here. A point offered
above it measured the client, not the engine (measure.validity judges it so)."""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from stackbook.host import cpu_model
from stackbook.loadgen.load_point import Load
from stackbook.locations import cache_dir
from stackbook.measure.validity import above_ceiling

# Offered rates, req/s, each for half a second (at least 60 requests): a few seconds in all.
CAMPAIGN_LADDER = [50, 100, 200, 400, 800, 1600]
RUNG_SECONDS = 0.5


def host_key() -> dict:
    """The host a ceiling belongs to: its name, CPU model and logical CPUs."""
    return {"hostname": os.uname().nodename, "cpu": cpu_model(), "logical_cpus": os.cpu_count()}


def ceilings_file() -> Path:
    return cache_dir() / "harness-ceilings.json"


def measure_ceiling(processes: int = 1, rates: list[float] | None = None) -> dict:
    """The highest open-loop rate the harness holds here by the sweep's own rule, from as many
    client processes as the campaign sends with; the ladder stops at its first rate not held."""
    from stackbook.harness.selftest import rate_ladder, start_server

    t0 = time.perf_counter()
    proc, url = start_server()
    try:
        held, ladder = rate_ladder(url, rates or CAMPAIGN_LADDER, processes=processes, seconds=RUNG_SECONDS)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
    top = ladder[-1]["held"] if ladder else False
    return {"max_open_loop_rate_rps": held, "first_rate_not_held": None if top or not ladder
            else ladder[-1]["rate_rps"],
            "processes": processes, "host": host_key(), "ladder_top_held": top,
            "note": (f"every rate of the ladder held (up to {held:g} req/s): the ceiling is at least that"
                     if top else f"{ladder[-1]['rate_rps']:g} req/s was not held") if ladder else "no rate measured",
            "rule": "an open-loop point offered at or above first_rate_not_held is invalid (measure.validity)",
            "measured_unix": time.time(), "seconds": round(time.perf_counter() - t0, 1), "ladder": ladder}


def campaign_ceiling(campaign) -> dict:
    """Measured at campaign start for the campaign's client processes, and remembered for this host;
    a closed loop has no rate to hold, so nothing is judged against a ceiling and none is measured."""
    if not campaign.protocol.arrival.plan_type.judged_against_harness_ceiling:
        return {"not_measured": "a closed loop sends each request when a reply ends: no open-loop rate is "
                                "judged against the harness's ceiling", "host": host_key(),
                "processes": campaign.protocol.loadgen.processes}
    try:
        record = measure_ceiling(processes=campaign.protocol.loadgen.processes)
    except (OSError, RuntimeError) as err:
        return {"unknown": f"the harness self-test did not run: {err}"}
    remember(record)
    return record


def record_ceiling(manifest: dict, campaign) -> None:
    """Into the run's manifest, once: a resumed run keeps the ceiling its first start measured."""
    if "harness_ceiling" not in manifest:
        manifest["harness_ceiling"] = campaign_ceiling(campaign)


def remember(record: dict) -> None:
    path = ceilings_file()
    known = json.loads(path.read_text()) if path.exists() else []
    known = [r for r in known if (r.get("host"), r.get("processes")) != (record["host"], record["processes"])]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(known + [{k: v for k, v in record.items() if k != "ladder"}], indent=1))


def last_ceiling(processes: int = 1) -> dict | None:
    """The ceiling last measured on this host for this many client processes, if any."""
    path = ceilings_file()
    if not path.exists():
        return None
    try:
        known = json.loads(path.read_text())
    except ValueError:
        return None
    mine = [r for r in known if r.get("host") == host_key() and r.get("processes") == processes]
    return max(mine, key=lambda r: r.get("measured_unix", 0)) if mine else None


def ceiling_warnings(campaign) -> list[str]:
    """For `run --check`: each open-loop rate above the ceiling last measured on this host."""
    out = []
    for arm in campaign.arms:
        protocol = campaign.protocol_for(arm)
        ceiling = last_ceiling(protocol.loadgen.processes)
        if not ceiling:
            continue
        for level in protocol.arrival.load_levels():
            rate = Load.of(level).rate
            if rate and above_ceiling(rate, ceiling):
                out.append(f"arm {arm.name}: rate {rate:g} req/s is beyond the harness ceiling last measured on this "
                           f"host (it did not hold {ceiling['first_rate_not_held']:g} req/s with "
                           f"{ceiling['processes']} "
                           f"client process(es)): that point will be invalid; raise protocol.loadgen.processes or "
                           "lower the rate")
    return out
