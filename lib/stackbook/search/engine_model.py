"""The model that ranks an engine's candidate configurations: the knee model (a closed loop of
`concurrency` clients over a batch of at most `slots` sequences whose step takes t0 + t1*b) with
the step's costs fitted on the engine itself.

Two calibration points of the default configuration fix the line: one client (TTFT and TPOT
with a batch of one) and the campaign's clients (TPOT with the batch they fill). The threads scale
both costs by the cores they can use (min(threads, cores)), an assumption the measurement judges;
knobs the model has no term for (micro-batch, flash attention) are predicted to change nothing,
so the search only measures them once nothing else is predicted to help.
"""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from stackbook.harness.knee_scheduler import Knee
from stackbook.search.knee import KneeLoad, goodput_of
from stackbook.engines.knobs import Value

ERROR_FLOOR = 0.15  # a line through two points of one configuration, threads scaled linearly: no tighter


class Timing(BaseModel):
    """Mean TTFT and TPOT of one calibration measurement, in seconds, at `batch` sequences."""
    model_config = ConfigDict(frozen=True)
    batch: int = Field(ge=1)
    ttft_s: float = Field(gt=0)
    tpot_s: float = Field(gt=0)


class StepCosts(BaseModel):
    """The fitted step: t0 + t1*b milliseconds at `threads` threads, a prefill worth `prefill_steps`
    steps of one sequence."""
    model_config = ConfigDict(frozen=True)
    t0_ms: float = Field(ge=0)
    t1_ms: float = Field(ge=0)
    prefill_steps: int = Field(ge=1)
    threads: int = Field(ge=1)
    cores: int = Field(ge=1)

    def knee(self, slots: int, threads: int) -> Knee:
        speed = min(threads, self.cores) / min(self.threads, self.cores)
        return Knee(max_batch=slots, t0_ms=self.t0_ms / speed, t1_ms=self.t1_ms / speed,
                    prefill_steps=self.prefill_steps)


def fit(one: Timing, many: Timing, threads: int, cores: int) -> StepCosts:
    """The step's line through the two calibration points (a TPOT that fell as the batch grew is
    read as noise about a flat line: t1 = 0)."""
    if many.batch > one.batch:
        t1 = max(0.0, (many.tpot_s - one.tpot_s) / (many.batch - one.batch))
    else:
        t1 = 0.0
    t0 = max(0.0, one.tpot_s - t1 * one.batch)
    step1 = t0 + t1
    prefill = max(1, round(max(0.0, one.ttft_s - step1) / step1) + 1) if step1 > 0 else 1
    return StepCosts(t0_ms=t0 * 1000, t1_ms=t1 * 1000, prefill_steps=prefill, threads=threads, cores=cores)


def predict(config: dict[str, Value], costs: StepCosts, load: KneeLoad, slots_knob: str, threads_knob: str) -> float:
    """Goodput inside the SLO of one configuration, from the fitted step."""
    return goodput_of(costs.knee(int(config[slots_knob]), int(config[threads_knob])), load)
