"""Arrival patterns: how requests reach the engine at each load level of a sweep. Each pattern
knows its load levels, its cool-down, how many prompts a level sends and the schedule they
follow, and the plan a point is sent by (loadgen.plans); the schedule arithmetic itself lives in
loadgen.arrivals."""
from __future__ import annotations

from typing import Annotated, ClassVar, Literal, Union

from pydantic import Field, field_validator, model_validator

from stackbook.config.arrival_base import ArrivalLaw, ArrivalPattern, LoadLevel, PointCounts
from stackbook.config.trace_replay import TraceReplay
from stackbook.loadgen.arrivals import constant_schedule, gamma_schedule, poisson_schedule
from stackbook.loadgen.plans import ClosedPlan
from stackbook.measure.validity import (CONCURRENCY_TOLERANCE, expected_in_flight, measured_requests_for,
                                        measured_requests_to_hold)


__all__ = ["Arrival", "ArrivalLaw", "ArrivalPattern", "ClosedLoop", "ConstantArrivals", "GammaArrivals", "LoadLevel",
           "OpenLoop", "PoissonArrivals", "TraceReplay"]


class ClosedLoop(ArrivalPattern):
    """N clients, each sending its next request as soon as the previous one finishes."""
    kind: Literal["closed_loop"] = "closed_loop"
    concurrency: list[int] = Field(default_factory=lambda: [1])
    plan_type: ClassVar[type] = ClosedPlan

    def point_plan(self, level: LoadLevel, prompts: int, seed: int, cooldown: int) -> ClosedPlan:
        return ClosedPlan(level["concurrency"], cooldown)

    def delivered_load(self, point: dict) -> float | None:
        """The mean requests in flight: what the clients hold, whatever the engine's speed."""
        return point.get("in_flight_mean")

    def prompt_seed(self, level: LoadLevel, seed: int) -> int:
        return seed * 1000 + level["concurrency"]

    @field_validator("concurrency")
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("give at least one concurrency level, e.g. [1, 4]")
        if any(c <= 0 for c in v):
            raise ValueError(f"concurrency levels must be positive integers, got {v}")
        return v

    def load_levels(self) -> list[LoadLevel]:
        return [{"level": f"c{c}", "concurrency": c} for c in self.concurrency]

    def load_refusal(self, measured_requests: int) -> str | None:
        short = [c for c in self.concurrency if measured_requests < measured_requests_for(c)]
        if not short:
            return None
        c = max(short)
        return (f"requests_per_point {measured_requests} cannot hold concurrency {c}: a closed loop's window "
                f"holds about {expected_in_flight(c, measured_requests):.2f} of {c} in flight with "
                f"{measured_requests} alike measured requests (fewer with uneven ones), outside the load rule's "
                f"{CONCURRENCY_TOLERANCE:.0%}, so its points would be discarded. Fix: set requests_per_point to at "
                f"least {measured_requests_for(c)} ({measured_requests_to_hold(c)} holds with room to spare), or "
                f"drop concurrency {', '.join(map(str, short))}")

    def narrow_loads(self, measured_requests: int) -> list[str]:
        return [f"concurrency {c}: {measured_requests} measured requests hold about "
                f"{expected_in_flight(c, measured_requests):.2f} of {c} in flight (the rule keeps "
                f"{c * (1 - CONCURRENCY_TOLERANCE):.2f} and above) if alike, less with uneven lengths, so chance "
                f"can discard the point; {measured_requests_to_hold(c)} hold it with room"
                for c in self.concurrency
                if measured_requests_for(c) <= measured_requests < measured_requests_to_hold(c)]

    def cooldown_requests(self, level: LoadLevel, protocol: PointCounts) -> int:
        # A fixed-count closed loop otherwise drains at its end: the last measured requests
        # would run with fewer than `concurrency` in flight.
        return level["concurrency"] - 1


class OpenLoop(ArrivalPattern):
    """Requests sent on a schedule whatever the replies do, at each of `rates`."""
    rates: list[float] = Field(description="requests per second, one sweep point each")
    # Only gamma arrivals set the burstiness; the others accept the default 1 that every run
    # directory's resolved campaign records, so earlier runs still load.
    burstiness: float = Field(1.0, gt=0, description="gamma: squared CV of inter-arrival times (1 = Poisson)")
    burstiness_is_set: ClassVar[bool] = False

    @field_validator("rates")
    @classmethod
    def _positive_rates(cls, v: list[float]) -> list[float]:
        if not v:
            raise ValueError("give at least one rate, e.g. [0.5, 1, 2]")
        if any(r <= 0 for r in v):
            raise ValueError(f"rates must be positive (requests per second), got {v}")
        return v

    @model_validator(mode="after")
    def _burstiness_only_where_set(self):
        if self.burstiness != 1.0 and not self.burstiness_is_set:
            raise ValueError(f"burstiness {self.burstiness:g} has no effect on {self.kind} arrivals; use "
                             "kind: gamma to set it, or remove burstiness")
        return self

    def load_levels(self) -> list[LoadLevel]:
        return [{"level": f"rate{r:g}", "rate": r} for r in self.rates]

    def prompt_seed(self, level: LoadLevel, seed: int) -> int:
        return seed * 1000 + int(level["rate"] * 1000)

    def cooldown_requests(self, level: LoadLevel, protocol: PointCounts) -> int:
        # As many as the warm-up, so the measured requests never see the load tail off.
        return protocol.warmup_requests


class ConstantArrivals(OpenLoop):
    """Evenly spaced requests."""
    kind: Literal["constant"]

    def arrival_law(self) -> ArrivalLaw:
        return ArrivalLaw("constant", 0.0, False)

    def schedule(self, level: LoadLevel, n: int, seed: int) -> list[float]:
        return constant_schedule(level["rate"], n)


class PoissonArrivals(OpenLoop):
    """Independent arrivals: exponential gaps, as many independent users make."""
    kind: Literal["poisson"]

    def arrival_law(self) -> ArrivalLaw:
        return ArrivalLaw("poisson", 1.0, True)

    def schedule(self, level: LoadLevel, n: int, seed: int) -> list[float]:
        return poisson_schedule(level["rate"], n, seed)


class GammaArrivals(OpenLoop):
    """Gamma-distributed gaps: burstier (or more regular) than Poisson at the same mean rate."""
    kind: Literal["gamma"]
    burstiness_is_set: ClassVar[bool] = True

    def arrival_law(self) -> ArrivalLaw:
        # A gamma law of shape 1 is the exponential: burstiness 1 is a Poisson process.
        return ArrivalLaw(f"gamma (C_a² = {self.burstiness:g})", self.burstiness, self.burstiness == 1.0)

    def schedule(self, level: LoadLevel, n: int, seed: int) -> list[float]:
        return gamma_schedule(level["rate"], n, self.burstiness, seed)


Arrival = Annotated[Union[ClosedLoop, ConstantArrivals, PoissonArrivals, GammaArrivals, TraceReplay],
                    Field(discriminator="kind")]
