"""results.json's `capacity` section: each repetition's search as it ended, every probe with the
figures it was judged on, so the interval can be re-derived from the records it names."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class ProbeRecord(BaseModel):
    model_config = ConfigDict(extra="allow")
    point: str = Field(description="the probe's point name in capacity_requests.jsonl")
    load: float
    verdict: Literal["inside", "outside", "undecided"]
    reason: str
    requests: int
    met: int | None = None
    duration_s: float = Field(description="first send to last byte of the probe's requests")


class SearchRound(BaseModel):
    """One repetition's search: the interval, why it stopped, every probe."""
    model_config = ConfigDict(extra="allow")
    lower: float | None = Field(description="the highest concurrency proven inside the SLO (None: none)")
    upper: float | None = Field(description="the lowest concurrency proven outside it (None: none)")
    resolved: bool
    stop_reason: str
    undecided: list[float] = []
    requests: int
    duration_s: float
    probes: list[ProbeRecord]


class CapacityResults(BaseModel):
    model_config = ConfigDict(extra="allow")
    plan: dict[str, Any]
    target: float = Field(description="the attainment a load must prove (protocol.slo.attainment)")
    slo: dict[str, Any]
    rounds: dict[str, SearchRound] = Field(description="per repetition (its number as text)")
