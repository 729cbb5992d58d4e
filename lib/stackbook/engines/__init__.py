"""Engine adapters: one small surface (command, readiness, log, identity, realized capacity,
metrics path, shutdown of the whole process tree) for every way of serving a model."""
from __future__ import annotations

from stackbook.engines.base import EngineAdapter, EngineStartError
from stackbook.engines.endpoint import OpenAIEndpointAdapter
from stackbook.engines.llama_cpp import LlamaCppAdapter
from stackbook.engines.vllm import SglangAdapter, VllmAdapter, VllmCpuAdapter

ADAPTERS: dict[str, type[EngineAdapter]] = {
    "llama_cpp": LlamaCppAdapter,
    "vllm_cpu": VllmCpuAdapter,
    "vllm": VllmAdapter,
    "sglang": SglangAdapter,
    "openai_endpoint": OpenAIEndpointAdapter,
}


def adapter_for(campaign, arm, log_path=None) -> EngineAdapter:
    """The adapter that serves `arm` of `campaign`, its model artifacts resolved."""
    from stackbook.model.artifacts import artifacts_for

    kind = arm.engine.kind
    artifacts = None if kind == "openai_endpoint" else artifacts_for(campaign.model)
    return ADAPTERS[kind](arm.engine, artifacts, campaign.protocol_for(arm), campaign.model.name, log_path)


__all__ = ["ADAPTERS", "EngineAdapter", "EngineStartError", "adapter_for"]
