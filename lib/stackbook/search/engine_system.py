"""A live engine as a system the search tunes: one arm of an ordinary campaign (its engine, model,
protocol, prompts and SLO), measured at a closed loop of `concurrency` clients, its knobs the ones
the arm's engine kind declares.

A knob named `engine.<field>` sets that field of the arm's engine; one named as a launch flag
(`--flash-attn`) is passed on the engine's command line; an A/A knob changes nothing. Knobs under
`protocol.` (the KV cache's precision) are not searched here: a precision change must pass the
correctness canaries again, which a campaign arm does.
"""
from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from stackbook.config.campaign import Arm, Campaign
from stackbook.config.errors import CampaignError
from stackbook.config.loading import load_campaign
from stackbook.engines import adapter_class, engine_kinds
from stackbook.locations import REPO_ROOT
from stackbook.search.knee import KneeLoad
from stackbook.engines.knobs import Knob, Value

NOT_SEARCHED_PREFIX = "protocol."
CARRIED = "carried"  # the concurrency the incumbent is proven to carry, found before the first step


class EngineSystem(BaseModel):
    """`system: {kind: engine, campaign: ..., arm: ..., concurrency: N, requests: M}`."""
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["engine"]
    campaign: str = Field(description="the campaign file whose arm is searched (its protocol fixes prompts and SLO)")
    arm: str = Field(description="the arm whose engine is started with each configuration")
    concurrency: int | Literal["carried"] = Field(
        description="closed-loop clients every configuration is measured at; `carried`: the highest the "
                    "incumbent is proven to carry inside the SLO, found by the campaign's capacity search first")
    requests: int = Field(ge=1, description="measured requests per measurement")

    @cached_property
    def base(self) -> Campaign:
        path = Path(self.campaign)
        return load_campaign(path if path.is_absolute() else REPO_ROOT / path)

    @cached_property
    def base_arm(self) -> Arm:
        return next(a for a in self.base.arms if a.name == self.arm)

    @model_validator(mode="after")
    def _arm_exists(self) -> "EngineSystem":
        try:
            names = [a.name for a in self.base.arms]
        except CampaignError as err:
            raise ValueError(f"system.campaign: {err}") from None
        if self.arm not in names:
            raise ValueError(f"system.arm: no arm {self.arm!r} in {self.campaign}; its arms are {', '.join(names)}")
        if isinstance(self.concurrency, int) and self.concurrency < 1:
            raise ValueError(f"system.concurrency: {self.concurrency} clients; name 1 or more, or `{CARRIED}`")
        if self.concurrency == CARRIED and self.base.protocol_for(self.base_arm).capacity is None:
            raise ValueError(f"system.concurrency: `{CARRIED}` runs the campaign's capacity search, and "
                             f"{self.campaign} has no protocol.capacity section; add one (campaigns/capacity.yaml "
                             "has an example) or name a concurrency")
        adapter = adapter_class(self.base_arm.engine.kind)
        if adapter.search_model_knobs is None:
            modelled = [k for k in engine_kinds() if adapter_class(k).search_model_knobs is not None]
            raise ValueError(f"system.arm: {self.arm} runs {self.base_arm.engine.kind}, which declares no slots and "
                             f"threads knobs for the search's step model yet; search an arm of kind "
                             f"{' or '.join(modelled)}")
        return self

    def declared(self) -> tuple[Knob, ...]:
        """The kind's knobs, those that change the protocol left out, each defaulting to what the
        searched arm sets (its engine field, or its launch flag), so the incumbent is the arm."""
        knobs = adapter_class(self.base_arm.engine.kind).search_knobs
        return tuple(self._as_the_arm_sets(k) for k in knobs if not k.name.startswith(NOT_SEARCHED_PREFIX))

    def _as_the_arm_sets(self, knob: Knob) -> Knob:
        engine = self.base_arm.engine
        if knob.name.startswith("engine."):
            value = getattr(engine, knob.name.removeprefix("engine."), None)
        else:
            args = list(engine.extra_args)
            at = len(args) - 1 - args[::-1].index(knob.name) if knob.name in args else None
            value = args[at + 1] if at is not None and at + 1 < len(args) else None
            value = next((v for v in knob.values if str(v) == value), value)
        if value is None or value == knob.default:
            return knob
        values = knob.values if value in knob.values else (value, *knob.values)
        return knob.model_copy(update={"default": value, "values": values})

    @property
    def searches_carried_load(self) -> bool:
        return self.concurrency == CARRIED

    def at(self, concurrency: int) -> "EngineSystem":
        """The same system at a number of clients (the carried load, once found)."""
        return self.model_copy(update={"concurrency": concurrency})

    def model_knobs(self) -> tuple[str, str]:
        return adapter_class(self.base_arm.engine.kind).search_model_knobs

    def load(self) -> KneeLoad:
        """The load the model reads: the clients, the protocol's mean reply and its SLO."""
        p = self.base.protocol_for(self.base_arm)
        return KneeLoad(concurrency=self.concurrency, requests=self.requests,
                        output_tokens=max(2, round(p.workload.output_tokens.mean_tokens())),
                        ttft_ms=p.slo.ttft_ms, tpot_ms=p.slo.tpot_ms)

    def configured(self, config: dict[str, Value]) -> Arm:
        """The arm with this configuration's knob values; a knob at its default leaves the arm as
        the campaign has it."""
        knobs = {k.name: k for k in self.declared()}
        engine = self.base_arm.engine
        fields, flags = {}, []
        for name, value in config.items():
            knob = knobs[name]
            if knob.control or value == knob.default:
                continue
            if name.startswith("engine."):
                fields[name.removeprefix("engine.")] = value
            else:
                flags += [name, str(value)]
        kept, args = list(engine.extra_args), []
        while kept:  # a flag the configuration sets replaces the arm's own
            arg = kept.pop(0)
            if arg in flags[::2]:
                kept = kept[1:]
            else:
                args.append(arg)
        spec = type(engine).model_validate(engine.model_dump() | fields | {"extra_args": [*args, *flags]})
        return self.base_arm.model_copy(update={"engine": spec})

    def capacity_lines(self, default: dict[str, Value], final: dict[str, Value], folder: Path, seed: int) -> list[str]:
        """The default's and the final configuration's capacity inside the SLO and cost, each found
        by the campaign's capacity search; none where the campaign has no capacity section."""
        if self.base.protocol_for(self.base_arm).capacity is None:
            return []
        from stackbook.search.carried_load import capacity_of, capacity_words  # starts engines

        configs = {"default": default} | ({"final": final} if final != default else {})
        return [f"{name}: {capacity_words(capacity_of(self, cfg, folder, seed))}" for name, cfg in configs.items()]

    def searcher(self, incumbent: dict[str, Value], folder: Path, seed: int):
        """The loop's measure (an engine per measurement) and predict (the step model fitted here)."""
        from stackbook.search.engine_searcher import engine_searcher  # starts engines: only when searching

        return engine_searcher(self, incumbent, folder, seed)
