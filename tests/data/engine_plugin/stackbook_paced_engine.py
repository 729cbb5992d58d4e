"""An engine kind defined outside stackbook, registered through the `stackbook.engines` entry point
(its metadata beside it): the calibration server in its paced mode, launched and stopped by the
same machinery as every built-in kind."""
from __future__ import annotations

import sys
from typing import Literal

from stackbook.engines.base import EngineAdapter
from stackbook.engines.spec import EngineSpec


class PacedEngine(EngineSpec):
    kind: Literal["paced_example"]
    serves_local_weights = False
    sizing_skip_reason = "a synthetic server: no weights to size"
    gap_ms: float = 5.0

    def configured_capacity(self, protocol) -> dict:
        return {"sequences": "unbounded"}

    def predicted_capacity(self, basis) -> dict:
        return {"max_concurrency": None, "rule": "no pool: a synthetic server"}


class PacedAdapter(EngineAdapter):
    spec_model = PacedEngine
    installs = "nothing: the calibration server ships with stackbook"
    length_control = "the server emits exactly max_tokens"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "stackbook.harness.calibration_server", "--host", self.spec.host,
                "--port", str(self.port), "--ttft-ms", "1", "--gap-ms", str(self.spec.gap_ms)]

    def identity(self) -> dict:
        return {"engine": "paced calibration server (an entry-point kind)"}
