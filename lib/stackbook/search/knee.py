"""The knee server as a kind the search can tune: its knobs, a configuration as a `Knee`, the
model's goodput for a configuration (the closed form of harness.knee_scheduler), and a simulated
measurement (a seeded closed loop), so the loop can be run many times on a known truth.

Its knobs: the batch limit B (orchestration: how many sequences a step admits) and the step's
costs t0 + t1*b (kernels: a preset trading the fixed cost against the cost per sequence, as a
fused or a graph-captured step does), and an A/A label that changes nothing. Under a TPOT bound
the best B is the largest whose step stays within it: a smaller one leaves goodput queued, a
larger one puts every token over the bound once the load fills it.
"""
from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

from stackbook.harness.knee_scheduler import Knee, Lengths, SloBounds, simulate_closed_loop, steady_state
from stackbook.engines.knobs import Knob, Value
from stackbook.search.step import Point, point_from_requests

KNOBS = (
    Knob(name="max_batch", layer="orchestration", values=(2, 4, 8, 16, 32), default=4,
         what="B: sequences one step decodes together at most"),
    Knob(name="step_costs", layer="kernels", values=("20,0.5", "10,1.5", "4,3"), default="20,0.5",
         what="t0,t1 in ms: a step over b sequences takes t0 + t1*b"),
    Knob(name="label", layer="host execution", values=("a", "b"), default="a", control=True,
         what="A/A: a name on the configuration, the same server either way"),
)
ERROR_FLOOR = 0.05  # the closed form's stated error: one incumbent cannot show it smaller


class KneeLoad(BaseModel):
    """What every configuration is measured at: a closed loop and the SLO its goodput counts."""
    model_config = ConfigDict(frozen=True, extra="forbid")

    concurrency: int = Field(ge=1, description="closed-loop clients")
    output_tokens: int = Field(ge=2, description="mean output tokens per request")
    output_jitter: float = Field(0.0, ge=0, lt=1, description="each request's length within +- this share of the mean")
    ttft_ms: float | None = Field(None, gt=0)
    tpot_ms: float | None = Field(None, gt=0)
    requests: int = Field(ge=1, description="measured requests per measurement")

    @property
    def slo(self) -> SloBounds:
        return SloBounds(ttft_s=None if self.ttft_ms is None else self.ttft_ms / 1000,
                         tpot_s=None if self.tpot_ms is None else self.tpot_ms / 1000)

    @property
    def lengths(self) -> Lengths:
        return Lengths(self.output_tokens, self.output_jitter)


def knee_of(config: dict[str, Value], admit_window_ms: float = 0.0) -> Knee:
    t0, t1 = (float(x) for x in str(config["step_costs"]).split(","))
    return Knee(max_batch=int(config["max_batch"]), t0_ms=t0, t1_ms=t1, admit_window_ms=min(admit_window_ms, t0))


def predict(config: dict[str, Value], load: KneeLoad) -> float:
    """The model's goodput for one configuration of the knee server."""
    return goodput_of(knee_of(config), load)


def goodput_of(knee: Knee, load: KneeLoad) -> float:
    """The closed loop's steady state (MVA with zero think time) times the share of requests
    inside the SLO. Every token's step is the same, so TPOT is in or out for all; past the knee
    TTFT is the queue's wait, taken as normal about its mean with the spread the lengths' jitter
    gives it (a bound, not a distribution: its error is the model's)."""
    ss = steady_state(knee, load.concurrency, knee.steps_of(load.output_tokens))
    ttft = ss["wait_mean_s"] + knee.prefill_steps * ss["step_s"]
    slo = load.slo
    if slo.tpot_s is not None and ss["tpot_s"] > slo.tpot_s:
        return 0.0
    share = 1.0
    if slo.ttft_s is not None:
        spread = max(0.1, load.output_jitter / math.sqrt(3)) * ss["wait_mean_s"]
        share = (1.0 if ttft <= slo.ttft_s else 0.0) if spread <= 0 else \
            0.5 * (1 + math.erf((slo.ttft_s - ttft) / (spread * math.sqrt(2))))
    return ss["throughput_rps"] * load.output_tokens * share


def simulated_point(config: dict[str, Value], load: KneeLoad, seed: int) -> Point:
    """One measurement on the simulated scheduler: `requests` measured after one warm-up and
    before one cool-down request per client; its duration the model's own seconds."""
    c = load.concurrency
    run = simulate_closed_loop(knee_of(config), c, load.requests + 2 * c, load.lengths, seed)
    measured = run.measured(c, c)
    window = max(t.end_s for t in measured) - min(t.arrival_s for t in measured)
    slo = load.slo
    return point_from_requests(((t.ttft_s, t.tpot_s, t.output_tokens) for t in measured), window,
                               slo.ttft_s, slo.tpot_s).model_copy(update={"duration_s": run.duration_s})
