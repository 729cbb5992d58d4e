"""The loop's measure and predict for a live engine: the load found first where the campaign asks
for the one the incumbent carries, then the step model fitted on two calibration points of the
incumbent (one client, then the searched clients), each kept as a measurement."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from stackbook.engines.knobs import Value
from stackbook.search import engine_model
from stackbook.search.carried_load import carried_load
from stackbook.search.engine_probe import measure_on_engine, timing

if TYPE_CHECKING:
    from stackbook.search.engine_system import EngineSystem


def engine_searcher(system: EngineSystem, incumbent: dict[str, Value], folder: Path, seed: int):
    """(measure, predict, the model's error floor) for the loop, the step model in step_model.json."""
    if system.searches_carried_load:
        system = system.at(carried_load(system, incumbent, folder, seed))
    slots, threads = system.model_knobs()
    one = timing(system, incumbent, 1, seed, folder)
    many = timing(system, incumbent, system.concurrency, seed, folder)
    costs = engine_model.fit(one, many, int(incumbent[threads]), os.cpu_count() or 1)
    (folder / "step_model.json").write_text(json.dumps({"one_client": one.model_dump(), "clients": many.model_dump(),
                                                        "fitted": costs.model_dump()}, indent=1))
    load = system.load()
    return (lambda cfg, sd: measure_on_engine(system, cfg, sd, folder),
            lambda cfg: engine_model.predict(cfg, costs, load, slots, threads), engine_model.ERROR_FLOOR)
