"""Every engine kind stackbook can run: each kind's module holds its spec model and its adapter;
this tuple is the one place that lists them. The campaign's `engine:` union and its list of kinds
are built from it."""
from __future__ import annotations

from stackbook.engines.base import EngineAdapter
from stackbook.engines.llama_cpp import LlamaCppAdapter
from stackbook.engines.openai_endpoint import OpenAIEndpointAdapter
from stackbook.engines.sglang import SglangAdapter
from stackbook.engines.spec import EngineSpec
from stackbook.engines.vllm import VllmAdapter
from stackbook.engines.vllm_cpu import VllmCpuAdapter

ENGINE_ADAPTERS: tuple[type[EngineAdapter], ...] = (
    LlamaCppAdapter,
    VllmCpuAdapter,
    VllmAdapter,
    SglangAdapter,
    OpenAIEndpointAdapter,
)

ADAPTERS: dict[str, type[EngineAdapter]] = {a.kind: a for a in ENGINE_ADAPTERS}


def engine_kinds() -> list[str]:
    """The `kind:` values a campaign accepts, in registry order."""
    return list(ADAPTERS)


def engine_specs() -> tuple[type[EngineSpec], ...]:
    """The spec model of every kind: the members of the campaign's engine union."""
    return tuple(a.spec_model for a in ENGINE_ADAPTERS)


def adapter_class(kind: str) -> type[EngineAdapter]:
    try:
        return ADAPTERS[kind]
    except KeyError:
        raise KeyError(f"unknown engine kind {kind!r}; registered kinds: {', '.join(ADAPTERS)}") from None
