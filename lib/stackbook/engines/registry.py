"""Every engine kind stackbook can run: each kind's module holds its spec model and its adapter;
this tuple is the one place that lists them. The campaign's `engine:` union and its list of kinds
are built from it, and everything the measurement and the analysis know of an engine (its
processes, its metric series, its decision facts) is read here from the kinds."""
from __future__ import annotations

from collections.abc import Callable

from stackbook.engines.base import EngineAdapter
from stackbook.engines.facts import MetricSeries, ProcessRole
from stackbook.engines.llama_cpp import LlamaCppAdapter
from stackbook.engines.mlx import MlxAdapter
from stackbook.engines.openai_endpoint import OpenAIEndpointAdapter
from stackbook.engines.sglang import SglangAdapter
from stackbook.engines.spec import EngineSpec
from stackbook.engines.transformers_serve import TransformersAdapter
from stackbook.engines.trtllm import TrtllmAdapter
from stackbook.engines.vllm import VllmAdapter
from stackbook.engines.vllm_cpu import VllmCpuAdapter

ENGINE_ADAPTERS: tuple[type[EngineAdapter], ...] = (
    LlamaCppAdapter,
    VllmCpuAdapter,
    MlxAdapter,
    TransformersAdapter,
    VllmAdapter,
    SglangAdapter,
    TrtllmAdapter,
    OpenAIEndpointAdapter,
)

# Every kind a campaign accepts: the built-in ones above, then any register() added, in order.
ADAPTERS: dict[str, type[EngineAdapter]] = {a.kind: a for a in ENGINE_ADAPTERS}
# What must follow when the kinds change (the campaign's engine union): called after each change.
_ON_CHANGE: list[Callable[[], None]] = []


def on_change(rebuild: Callable[[], None]) -> None:
    """Call `rebuild` whenever a kind is registered or unregistered."""
    _ON_CHANGE.append(rebuild)


def register(adapter: type[EngineAdapter]) -> None:
    """Add a kind defined elsewhere (its adapter, naming its spec model): the campaign accepts it
    and every fact it states is read with the others'."""
    if adapter.kind in ADAPTERS:
        raise ValueError(f"engine kind {adapter.kind!r} is already registered")
    ADAPTERS[adapter.kind] = adapter
    for rebuild in _ON_CHANGE:
        rebuild()


def unregister(kind: str) -> None:
    """Remove a kind that register() added."""
    adapter_class(kind)
    del ADAPTERS[kind]
    for rebuild in _ON_CHANGE:
        rebuild()


# A package outside this repository adds a kind by naming its adapter class in its metadata:
#   [project.entry-points."stackbook.engines"]
#   mykind = "mypackage.engine:MyAdapter"
ENTRY_POINT_GROUP = "stackbook.engines"


def register_entry_points() -> list[str]:
    """Register every kind an installed package declares under ENTRY_POINT_GROUP; one that does
    not load is named in a warning and left out, so it cannot take the other kinds down with it."""
    import warnings
    from importlib.metadata import entry_points

    added = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            adapter = ep.load()
            if not (isinstance(adapter, type) and issubclass(adapter, EngineAdapter)):
                raise TypeError(f"{ep.value} is not an EngineAdapter subclass")
            if adapter.kind not in ADAPTERS:
                register(adapter)
                added.append(adapter.kind)
        except Exception as err:  # noqa: BLE001 - a third party's error, reported and contained
            warnings.warn(f"engine kind from entry point {ep.name!r} ({ep.value}) left out: {err}", stacklevel=2)
    return added


def engine_kinds() -> list[str]:
    """The `kind:` values a campaign accepts, in registry order."""
    return list(ADAPTERS)


def engine_specs() -> tuple[type[EngineSpec], ...]:
    """The spec model of every kind: the members of the campaign's engine union."""
    return tuple(a.spec_model for a in ADAPTERS.values())


def adapter_class(kind: str) -> type[EngineAdapter]:
    try:
        return ADAPTERS[kind]
    except KeyError:
        raise KeyError(f"unknown engine kind {kind!r}; registered kinds: {', '.join(ADAPTERS)}") from None


def gpu_kinds() -> list[str]:
    """The kinds that serve only on an accelerator, in registry order."""
    return [k for k, a in ADAPTERS.items() if a.needs_gpu]


def process_roles() -> tuple[ProcessRole, ...]:
    """Every kind's process roles, in registry order, each once: the first whose pattern a
    process matches names it."""
    return tuple(dict.fromkeys(r for a in ADAPTERS.values() for r in a.process_roles))


def metric_series() -> tuple[MetricSeries, ...]:
    """Every kind's metric series, in registry order, each once (a kind may share its parent's)."""
    return tuple({id(a.metric_series): a.metric_series for a in ADAPTERS.values()}.values())


def series(field: str) -> tuple[str, ...]:
    """One field of every kind's metric series (kept, gauges, ...), joined, each name once."""
    return tuple(dict.fromkeys(name for m in metric_series() for name in getattr(m, field)))


def decision_kinds() -> list[type[EngineAdapter]]:
    """The kinds 00_decide's shortlist can name, in the registry's order (its shortlist order)."""
    return [a for a in ADAPTERS.values() if a.decision is not None]



def kinds_table() -> str:
    """The registered kinds as the Markdown table docs/campaigns.md carries (a test keeps the two
    equal, so the docs cannot drift from the registry): where each runs, how set-up installs it,
    how it forces an output length and whether it exports metrics."""
    rows = ["| kind | runs on | installed by | output length forced by | metrics |", "|---|---|---|---|---|"]
    for kind, a in ADAPTERS.items():
        where = a.runs_on or ("a managed endpoint" if a.remote else "an NVIDIA GPU" if a.needs_gpu else "this CPU")
        how = (f"`make {a.setup_target}` (`tools/bootstrap.sh {a.bootstrap_step}`)" if a.bootstrap_step
               else a.installs)
        rows.append(f"| `{kind}` | {where} | {how} | {a.length_control or 'what the endpoint shows it honours'} "
                    f"| {'`' + a.metrics_path + '`' if a.metrics_path else 'none'} |")
    return "\n".join(rows)


# Register last: a kind from another package sees every built-in one above.
register_entry_points()
