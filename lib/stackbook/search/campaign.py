"""A search campaign: the system searched (its kind, the load and SLO every configuration is
measured at) and its `search:` section (the budget, the knobs to try, the incumbent, the rule's
rounds and margin), validated before anything runs, each error naming the field and the fix."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from stackbook.config.errors import CampaignError, format_validation_error
from stackbook.search import knee
from stackbook.engines.knobs import Knob, Value, by_name
from stackbook.search.engine_system import EngineSystem


class KneeSystem(knee.KneeLoad):
    """The knee server (harness.knee_server): its knobs are in search.knee."""
    kind: Literal["knee"]

    def declared(self) -> tuple[Knob, ...]:
        return knee.KNOBS

    def capacity_lines(self, default: dict[str, Value], final: dict[str, Value], folder: Path, seed: int) -> list[str]:
        """The knee server's capacity is not searched: its report compares goodput at the load."""
        return []

    def searcher(self, incumbent: dict[str, Value], folder: Path, seed: int):
        """The loop's measure (a knee server per measurement) and predict (the closed form)."""
        from stackbook.search.knee_probe import measure_on_server  # starts servers: only when searching

        return (lambda cfg, sd: measure_on_server(cfg, self, sd), lambda cfg: knee.predict(cfg, self),
                knee.ERROR_FLOOR)


class Budget(BaseModel):
    model_config = ConfigDict(extra="forbid")
    steps: int = Field(8, ge=0, description="candidate changes measured at most")
    time_s: float = Field(3600, gt=0, description="measurement seconds at most, all steps together")


class SearchSection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    budget: Budget = Budget()
    knobs: list[str] | None = Field(None, description="the knobs to try (default: all the kind declares)")
    incumbent: dict[str, Value] = Field(default_factory=dict, description="knob values to start from "
                                        "(the kind's default for any left out)")
    rounds: int = Field(3, ge=2, description="interleaved rounds per comparison (two at least: one has no spread)")
    max_rounds: int = Field(6, ge=2, description="rounds at most: while undecided one more is added up to this")
    margin: float = Field(0.05, gt=0, lt=1, description="the share a candidate must be ahead by")
    confidence: float = Field(0.95, gt=0.5, lt=1)


    @model_validator(mode="after")
    def _rounds(self) -> "SearchSection":
        if self.max_rounds < self.rounds:
            raise ValueError(f"max_rounds {self.max_rounds} is under rounds {self.rounds}: set max_rounds to at "
                             f"least {self.rounds}")
        return self


class SearchCampaign(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    system: KneeSystem | EngineSystem = Field(discriminator="kind")
    search: SearchSection

    def declared(self) -> tuple[Knob, ...]:
        return self.system.declared()

    @model_validator(mode="after")
    def _knobs_exist(self) -> "SearchCampaign":
        known = by_name(self.declared())
        for name in [*(self.search.knobs or []), *self.search.incumbent]:
            if name not in known:
                raise ValueError(f"search: no knob {name!r} on kind {self.system.kind}; "
                                 f"its knobs are {', '.join(known)}")
        for name, v in self.search.incumbent.items():
            if v not in known[name].values:
                raise ValueError(f"search.incumbent.{name}: {v!r} is not among its values {list(known[name].values)}")
        return self

    def knobs(self) -> tuple[Knob, ...]:
        names = self.search.knobs
        return tuple(k for k in self.declared() if names is None or k.name in names)

    def incumbent(self) -> dict[str, Value]:
        return {**{k.name: k.default for k in self.declared()}, **self.search.incumbent}


def load_search_campaign(path: str | os.PathLike) -> SearchCampaign:
    p = Path(path)
    if not p.is_file():
        raise CampaignError(f"{path}: no such campaign file; e.g. campaigns/search/knee.yaml")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise CampaignError(f"{path}: not valid YAML ({err})") from None
    if not isinstance(data, dict) or "search" not in data:
        raise CampaignError(f"{path}: a search campaign is a mapping with name, system and a search: section "
                            "(budget, knobs, incumbent); see campaigns/search/knee.yaml")
    try:
        return SearchCampaign.model_validate(data)
    except ValidationError as err:
        raise CampaignError(format_validation_error(str(path), err, SearchCampaign)) from None
