"""The campaign's capacity search and prices: how the highest load inside the SLO is searched for
(fixed before the first probe, so the stopping point cannot be chosen after seeing results), and
what an hour of the hardware and a managed endpoint's tokens cost, to price the capacity found."""
from __future__ import annotations

from pydantic import Field, model_validator

from stackbook.config.strict import Strict


class CapacitySearch(Strict):
    """Expand from `start` (doubling) until a probe is proven outside the SLO, then bisect to
    `tolerance`; a probe's verdict is the attainment of `protocol.slo` over its requests. The
    search runs in every repetition of each arm's sweep, so its probes follow the repetition
    rule: each round begun with a fresh engine start, arms interleaved across rounds."""
    start: int = Field(1, ge=1, description="the first concurrency probed")
    tolerance: int = Field(1, ge=1, description="stop when the highest load proven inside and the lowest proven "
                           "outside are this many clients apart")
    max_load: int = Field(64, ge=1, description="the largest concurrency the search may probe")
    requests: int = Field(60, ge=5, description="measured requests of a first probe (raised where a concurrency "
                          "needs more to hold its load, measure.validity.measured_requests_for)")
    max_requests: int = Field(240, ge=5, description="an undecided probe is repeated with twice the requests up "
                              "to this many")
    max_probes: int = Field(12, ge=1, description="probes (re-probes included) one search may run")
    max_wall_s: float = Field(900, gt=0, description="seconds of probing one search may spend")

    @model_validator(mode="after")
    def _ordered(self) -> "CapacitySearch":
        if self.start > self.max_load:
            raise ValueError(f"capacity.start {self.start} is above capacity.max_load {self.max_load}; lower start "
                             "or raise max_load")
        if self.max_requests < self.requests:
            raise ValueError(f"capacity.max_requests {self.max_requests} is below capacity.requests "
                             f"{self.requests}; set max_requests to at least {self.requests}")
        return self

    def plan(self):
        """The search's plan (capacity.probing.SearchPlan) for closed-loop concurrency."""
        from stackbook.capacity.probing import SearchPlan

        return SearchPlan(start=self.start, tolerance=self.tolerance, integer=True, min_load=1,
                          max_load=self.max_load, requests=self.requests, max_requests=self.max_requests,
                          max_probes=self.max_probes, max_wall_s=self.max_wall_s)


class Cost(Strict):
    """Prices for the cost line: the hardware's hour (owned or rented) against a managed
    endpoint's price per million output tokens, with where each came from."""
    hardware_hour_usd: float = Field(gt=0, description="what one hour of the measured hardware costs")
    managed_per_m_output_tokens_usd: float | None = Field(None, gt=0, description="a managed endpoint's price per "
                                                          "million output tokens, for comparison")
    source: str = Field(description="where the prices come from (a price list and its date)")
