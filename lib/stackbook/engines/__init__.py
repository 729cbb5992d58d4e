"""Engine kinds: one module each (spec, launch, readiness, log parsing, realized and predicted
capacity, request dialect, install facts), listed in engines/registry.py."""
from __future__ import annotations

from stackbook.engines.base import EngineAdapter, EngineStartError
from stackbook.engines.registry import ADAPTERS, adapter_class, engine_kinds, engine_specs
from stackbook.engines.spec import EngineSpec
from stackbook.model.artifacts import artifacts_for


def adapter_for(campaign, arm, log_path=None) -> EngineAdapter:
    """The adapter that serves `arm` of `campaign`, its model artifacts resolved."""
    protocol = campaign.protocol_for(arm)
    artifacts = artifacts_for(campaign.model, protocol.precision.weights) if arm.engine.serves_local_weights else None
    served = campaign.model.served_name or campaign.model.name
    return adapter_class(arm.engine.kind)(arm.engine, artifacts, protocol, served, log_path)


__all__ = ["ADAPTERS", "EngineAdapter", "EngineSpec", "EngineStartError", "adapter_class", "adapter_for",
           "engine_kinds", "engine_specs"]
