"""What every engine spec in a campaign has (where it listens, extra flags, how long it may take
to start), what its capacity rules read, and the port helpers its validation needs.

This module imports nothing from config: config builds the campaign's engine union from the
registry, so the dependency runs one way only."""
from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any, ClassVar, get_args

from pydantic import ValidationInfo, BaseModel, ConfigDict, Field, field_validator, model_validator

from stackbook.sizing.memory import resolve_state_precision

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class CapacityBasis:
    """What an engine's capacity rule is applied to: the model's geometry, the arm's protocol,
    the device's memory and the cache pool the sizing arithmetic found (None when unknown)."""
    geometry: Any
    protocol: Any  # the arm's config.protocol.Protocol: engines sit below config and do not import it
    device_memory_bytes: float
    activations_bytes: float
    artifact_bytes: int | None
    pool_bytes: float | None

    @property
    def state_precision(self) -> str:
        """The recurrent-state precision the engines' pool accounting uses (the one rule:
        sizing.resolve_state_precision)."""
        return resolve_state_precision(self.geometry, self.protocol.precision.state)


class EngineSpec(BaseModel):
    """The `engine:` mapping of an arm. Each kind's subclass adds its own fields and answers the
    questions that depend on the kind: its capacity as configured and as its own allocation rule
    predicts it, the pool it fixes, whether it serves local weights and whether sizing applies."""
    model_config = ConfigDict(extra="forbid")

    # Facts of the kind, read before any engine starts.
    serves_local_weights: ClassVar[bool] = True
    sizing_skip_reason: ClassVar[str | None] = None  # None: the 10_sizing notebook applies
    # Why the harness cannot put its delay relay in front of this kind (None: it can, the kind is
    # launched here and reached over plain HTTP at the address the runner hands its notebooks).
    not_relayable: ClassVar[str | None] = None
    # The launch flags by which this kind turns speculative decoding on (a draft model, a method).
    speculative_flags: ClassVar[tuple[str, ...]] = ()
    # The launch flags the adapter sets itself, each with the campaign field that sets it: the same
    # flag again in extra_args would override what the sizing, the fairness check and the records assume.
    managed_flags: ClassVar[dict[str, str]] = {}
    # The campaign fields that size the cache pool this kind allocates (none: the device decides it).
    pool_set_by: ClassVar[tuple[str, ...]] = ()

    host: str = Field("127.0.0.1", description="the address the engine listens on; one beyond loopback needs expose")
    expose: str | None = Field(None, description="why this engine listens beyond this machine (with a host other "
                               "than loopback); recorded in engine.json")
    port: int | None = Field(None, ge=1, le=65535, description="None picks a free port")
    overrides_managed: dict[str, str] = Field(
        default_factory=dict, description="flag -> why extra_args deliberately overrides a flag the adapter sets "
        "(a fault provoked on purpose); the launch command in engine.json shows the result")
    extra_args: list[str] = Field(default_factory=list)
    startup_timeout_s: float = Field(300, gt=0)

    @field_validator("extra_args")
    @classmethod
    def _not_managed(cls, v: list[str], info: ValidationInfo) -> list[str]:
        overridden = info.data.get("overrides_managed") or {}
        for i, arg in enumerate(v):
            flag = arg.split("=", 1)[0]
            if flag in cls.managed_flags and not (overridden.get(flag) or "").strip():
                raise ValueError(f"entry {i} ({flag!r}) is a flag the adapter sets itself, from "
                                 f"{cls.managed_flags[flag]}; "
                                 f"set that field instead and remove {flag} (and its value) from extra_args (to "
                                 f"override it on purpose, say why in overrides_managed: {{'{flag}': '<reason>'}})")
        return v

    @model_validator(mode="after")
    def _exposed_on_purpose(self) -> "EngineSpec":
        if self.host not in LOOPBACK_HOSTS and not (self.expose or "").strip():
            raise ValueError(f"host {self.host!r} makes the engine reachable beyond this machine; if that is "
                             "meant, say why with expose: '<reason>' (recorded in engine.json), else leave host "
                             "unset (127.0.0.1)")
        return self

    @field_validator("port")
    @classmethod
    def _port_free(cls, v: int | None) -> int | None:
        if v is not None and not port_is_free(v):
            raise ValueError(f"port {v} is already in use on 127.0.0.1; pick another or leave port unset "
                             "so a free one is chosen")
        return v

    @classmethod
    def kind_name(cls) -> str:
        """The `kind:` value that selects this spec in a campaign (its Literal tag)."""
        return get_args(cls.model_fields["kind"].annotation)[0]

    def configured_capacity(self, protocol: Any) -> dict:
        """The capacity settings as the campaign gives them to the engine."""
        raise NotImplementedError

    def sequences_at_once(self) -> int | None:
        """The most sequences this configuration lets the engine serve at once (its slots, its
        batch cap), None where the configuration does not cap it."""
        return None

    def predicted_capacity(self, basis: CapacityBasis) -> dict:
        """The engine's own allocation rule applied to the sizing arithmetic: what its log
        should report. Always carries a `rule` saying which rule was applied."""
        raise NotImplementedError

    def cache_pool_bytes(self) -> float | None:
        """The cache pool this configuration fixes by itself, when it does; else the sizing
        arithmetic (or hardware.pool_gib) decides it."""
        return None

    def speculative_decoding(self) -> str:
        """Speculative decoding as the arm's engine arguments set it: the flags and their values,
        or "none" (no flag of this kind's that turns it on)."""
        args, found = self.extra_args, []
        for i, a in enumerate(args):
            name = a.split("=", 1)[0]
            if name in self.speculative_flags:
                value = a.split("=", 1)[1] if "=" in a else (args[i + 1] if i + 1 < len(args) else "")
                found.append(f"{name} {value}".strip())
        return "; ".join(found) if found else "none: no speculative-decoding flag among the engine arguments"


class PythonEngineSpec(EngineSpec):
    """The spec of an engine that runs from a Python environment of its own."""
    python: str | None = Field(None, description="the interpreter of an environment with this engine installed; "
                               "None: the environment set-up installs in the cache")
