"""The precision every arm serves the weights and keeps the KV cache in, and `native`: the one this
host runs with native kernels in every engine of the campaign, chosen once for all arms so the
arms stay comparable. A bf16 weight on a CPU without AVX512_BF16 or AMX is widened to fp32 before
every multiply; asking for it there measures the emulation, not the engine."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from stackbook.config.strict import Strict
from stackbook.host import isa_flags, native_because

WeightPrecision = Literal["native", "bf16", "fp16", "fp32", "fp8", "int8", "int4", "q4_1", "q4_k_m", "q8_0"]
KvPrecision = Literal["native", "bf16", "fp16", "fp32", "fp8", "q8_0", "q4_0"]

# Narrowest first: fewer bytes a weight, so fewer to stream per token. bf16 before fp16 because
# the embedded checkpoint is bf16 (fp16 would round it and narrow its range); fp32 holds it exactly.
NATIVE_ORDER = ("bf16", "fp16", "fp32")


class PrecisionChoice(Strict):
    """How the precision was chosen, on the host the campaign was first validated on to run."""
    asked: str = Field(description="native, or the precision the campaign named")
    chosen: str
    reason: str
    host_isa: list[str] = Field(default_factory=list, description="the host's ISA flags the choice read")
    native_by_kind: dict[str, list[str]] = Field(
        default_factory=dict, description="per engine kind, the precisions it runs natively on that host")
    warning: str | None = Field(None, description="a named precision some engine emulates on that host")


class Precision(Strict):
    weights: WeightPrecision = "bf16"
    kv_cache: KvPrecision = "bf16"
    state: Literal["fp32", "bf16", "none"] = "none"
    choice: PrecisionChoice | None = Field(
        None, description="filled in when `native` is resolved: what was chosen and why (leave it unset)")

    @model_validator(mode="before")
    @classmethod
    def _one_name(cls, data):
        """`precision: native` (or fp32, ...) names the weights' and the KV cache's together."""
        return {"weights": data, "kv_cache": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _native_together(self) -> "Precision":
        if (self.weights == "native") != (self.kv_cache == "native"):
            raise ValueError(f"weights {self.weights!r} and kv_cache {self.kv_cache!r}: native chooses both "
                             "together; write precision: native, or name both precisions")
        return self

    @property
    def is_native(self) -> bool:
        return self.weights == "native"


def native_by_kind(kinds: dict[str, dict[str, tuple[str, ...]]], flags: list[str]) -> dict[str, dict[str, str]]:
    """Per kind, each precision it runs natively on a host with these flags, with the flag that
    makes it so."""
    return {kind: {p: why for p, needs in table.items() if (why := native_because(needs, flags))}
            for kind, table in kinds.items()}


def choose_native(kinds: dict[str, dict[str, tuple[str, ...]]], flags: list[str]) -> PrecisionChoice:
    """The narrowest precision every kind runs natively here, `kinds` being each engine kind's
    native_precisions; fp32 when they share no narrower one (every CPU computes in it)."""
    native = native_by_kind(kinds, flags)
    chosen = next((p for p in NATIVE_ORDER if all(p in n for n in native.values())), "fp32")
    if not kinds:
        reason = f"{chosen}: no engine of the campaign serves local weights here, so none constrains it"
    else:
        skipped = [_emulating(kinds, native, p) for p in NATIVE_ORDER[:NATIVE_ORDER.index(chosen)]]
        whys = {k: n[chosen] for k, n in native.items()}
        has = ("on any host" if set(whys.values()) == {"every host"} else
               "(" + ", ".join(f"{k}: {why}" for k, why in whys.items()) + ")")
        reason = (f"{chosen}: " + "".join(f"{line}; " for line in skipped)
                  + f"every engine runs {chosen} natively {has}"
                  + (", and fp32 holds the bf16 checkpoint exactly" if chosen == "fp32" else ""))
    return PrecisionChoice(asked="native", chosen=chosen, reason=reason, host_isa=sorted(flags),
                           native_by_kind={k: [p for p in NATIVE_ORDER if p in n] for k, n in native.items()})


def named_precision(precision: str, kinds: dict[str, dict[str, tuple[str, ...]]], flags: list[str]) -> PrecisionChoice:
    """A precision the campaign named, kept; the warning says which engines emulate it here."""
    native = native_by_kind(kinds, flags)
    emulating = _emulating(kinds, native, precision) if precision in NATIVE_ORDER else ""
    warning = None
    if emulating:
        warning = (f"protocol.precision.weights {precision!r}: {emulating} on this host, so the run measures the "
                   "emulation and runs markedly slower. Fix: precision: native, or keep it to compare with a host "
                   "that has those kernels")
    return PrecisionChoice(asked=precision, chosen=precision, reason="named by the campaign", host_isa=sorted(flags),
                           native_by_kind={k: [p for p in NATIVE_ORDER if p in n] for k, n in native.items()},
                           warning=warning)


def _emulating(kinds: dict[str, dict[str, tuple[str, ...]]], native: dict[str, dict[str, str]], precision: str) -> str:
    """Which kinds would emulate `precision` here, each with the flags it lacks ("" when none)."""
    by_needs: dict[tuple[str, ...], list[str]] = {}
    for kind, n in native.items():
        if precision not in n:
            by_needs.setdefault(tuple(kinds[kind].get(precision, ())), []).append(kind)
    return "; ".join(f"{', '.join(ks)} would emulate {precision} "
                     + (f"(no {' or '.join(needs)})" if needs else "(no native kernels on any host)")
                     for needs, ks in by_needs.items())


def kind_tables(arms) -> dict[str, dict[str, tuple[str, ...]]]:
    """Each engine kind of these arms that serves local weights, with its native precisions (a
    hosted model's precision is its provider's: those arms constrain nothing)."""
    from stackbook.engines.registry import adapter_class

    return {arm.engine.kind: adapter_class(arm.engine.kind).native_precisions
            for arm in arms if arm.engine.serves_local_weights}


def resolve_native(precision: Precision, arms, flags: list[str] | None = None) -> Precision:
    """`native` made concrete for these arms on this host (flags: this host's unless given); a
    named precision is returned as it is."""
    if not precision.is_native:
        return precision
    choice = choose_native(kind_tables(arms), isa_flags() if flags is None else flags)
    return precision.model_copy(update={"weights": choice.chosen, "kv_cache": choice.chosen, "choice": choice})


def precision_record(precision: Precision, arms, flags: list[str] | None = None) -> dict:
    """What the run records of its precision: the native choice with its reason, or a named
    precision with the warning when an engine emulates it on this host."""
    if precision.choice is not None:
        return precision.choice.model_dump()
    flags = isa_flags() if flags is None else flags
    return named_precision(precision.weights, kind_tables(arms), flags).model_dump()


def arm_precision(precision: Precision, recorded: dict | None) -> dict:
    """The passport's account of an arm's precision: the run's record (the manifest's) where the
    arm serves what the run chose or named, else the arm's own override."""
    if recorded and recorded.get("chosen") == precision.weights:
        return recorded
    if precision.choice is not None:
        return precision.choice.model_dump()
    if recorded:
        return {"asked": precision.weights, "chosen": precision.weights, "reason": "the arm's protocol_overrides"}
    return {"unknown": "not recorded: the run predates the record of how its precision was chosen"}


def precision_lines(precision: Precision, arms) -> tuple[list[str], list[str]]:
    """(warnings, notes) the campaign check prints: a named precision an engine emulates here, or
    what native chose and why."""
    record = precision_record(precision, arms)
    if record.get("warning"):
        return [record["warning"]], []
    if record["asked"] == "native":
        return [], [f"protocol.precision native: {record['reason']}"]
    return [], []
