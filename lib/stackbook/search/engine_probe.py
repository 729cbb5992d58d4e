"""A measurement on a live engine: each configuration is its own engine process, started from the
searched arm with the configuration's knob values and stopped after; the load is the capacity
probe's closed loop (the protocol's prompts, warm-up, cool-down and prefix-cache preparation), so
a configuration is measured exactly as the campaign's own capacity search measures a load.

Every measurement keeps its records, engine log and configuration under the search's folder
(`measurements/<configuration>-s<seed>/`); one already complete there is read back, not run
again, so an interrupted search resumes without restarting an engine for what it has.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from stackbook.capacity.engine_probe import EngineProbe, probe_name, probe_requests
from stackbook.engines import adapter_for
from stackbook.evidence.rundir import RunDir
from stackbook.loadgen.phases import Phase
from stackbook.loadgen.records import RecordWriter, read_records
from stackbook.measure.sweep import tokenizer_for
from stackbook.search.engine_model import Timing
from stackbook.engines.knobs import Value
from stackbook.search.step import Point, point_from_records, request_rows
from stackbook.steps.session import ArmSession

if TYPE_CHECKING:
    from stackbook.search.engine_system import EngineSystem

CONFIG_JSON = "configuration.json"


def config_digest(config: dict[str, Value]) -> str:
    """A configuration's short name in folder names: the digest of its knob values."""
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:10]


def folder_name(config: dict[str, Value], seed: int, concurrency: int) -> str:
    return f"{config_digest(config)}-c{concurrency}-s{seed}"


def measured_records(system: EngineSystem, config: dict[str, Value], seed: int, concurrency: int,
                     folder: Path) -> tuple[list, float | None]:
    """The measured requests of one configuration at `concurrency` clients, and the wall seconds
    the measurement took, engine start included: kept beside the records, so a resumed search
    spends what the first one did (None for a measurement from before they were kept)."""
    run = RunDir(folder / "measurements" / folder_name(config, seed, concurrency))
    arm_dir = run.arm(system.arm).create()
    config_json = run.path / CONFIG_JSON
    kept = json.loads(config_json.read_text()) if config_json.exists() else {}
    name, wanted = probe_name(seed, 1, concurrency), probe_requests(concurrency, system.requests)

    def measured() -> list:
        return [r for r in read_records(arm_dir.capacity_requests, latest_attempt=True)
                if r.point == name and r.phase == Phase.MEASURE]

    if len(measured()) >= wanted:
        return measured(), kept.get("wall_s")
    about = {"configuration": config, "seed": seed, "concurrency": concurrency}
    config_json.write_text(json.dumps(about, indent=1))
    began = time.perf_counter()
    with engine_probe(system, config, run, seed) as probe:
        probe(concurrency, wanted)
    wall_s = time.perf_counter() - began
    config_json.write_text(json.dumps({**about, "wall_s": wall_s}, indent=1))
    return measured(), wall_s


@contextmanager
def engine_probe(system: EngineSystem, config: dict[str, Value], run: RunDir, seed: int) -> Iterator[EngineProbe]:
    """The capacity probe on an engine started with this configuration, its records appended
    under `run`; the engine stopped when the block ends."""
    arm = system.configured(config)
    campaign = system.base
    arm_dir = run.arm(system.arm).create()
    adapter = adapter_for(campaign, arm, log_path=arm_dir.path / "engine.log")
    with adapter:
        session = ArmSession(campaign, arm, campaign.protocol_for(arm), run, arm_dir, adapter, started_here=True)
        with RecordWriter(arm_dir.capacity_requests) as writer:
            yield EngineProbe(session, seed, writer, tokenizer_for(session), f"search-{os.getpid()}")


def measure_on_engine(system: EngineSystem, config: dict[str, Value], seed: int, folder: Path) -> Point:
    """One point of the search: the configuration at the system's clients, judged by the SLO."""
    records, wall_s = measured_records(system, config, seed, system.concurrency, folder)
    slo = system.load().slo
    point = point_from_records(records, slo.ttft_s, slo.tpot_s)
    return point if wall_s is None else point.model_copy(update={"duration_s": wall_s})


def timing(system: EngineSystem, config: dict[str, Value], concurrency: int, seed: int, folder: Path) -> Timing:
    """Mean TTFT and TPOT at `concurrency` clients: a calibration point of the step model."""
    rows = request_rows(measured_records(system, config, seed, concurrency, folder)[0])
    slots = int(config[system.model_knobs()[0]])
    return Timing(batch=min(concurrency, slots), ttft_s=sum(r[0] for r in rows) / len(rows),
                  tpot_s=sum(r[1] for r in rows) / len(rows))
