"""The fixed protocol every arm of a campaign runs under: precision, decoding, workload, arrival
pattern, SLO, canaries and the preregistered discard rules."""
from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, field_validator, model_validator

from stackbook.config.arrival_patterns import Arrival, ClosedLoop, LoadLevel
from stackbook.config.capacity_search import CapacitySearch
from stackbook.config.length_distributions import Length
from stackbook.config.precision import Precision
from stackbook.config.strict import Strict
from stackbook.measure.metric_definitions import compared_names, decided_names

DECODING_PRESETS: dict[str, dict[str, float | int]] = {
    # Every sampling knob is explicit: engines disagree on defaults (llama.cpp applies
    # repeat_penalty, top_k 40 and min_p 0.05 unless told otherwise).
    "greedy": {"temperature": 0.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0},
    "instruct": {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "min_p": 0.0, "repetition_penalty": 1.0},
    "thinking": {"temperature": 1.0, "top_p": 0.95, "top_k": 20, "min_p": 0.0, "repetition_penalty": 1.0},
}


class ModelPreset(Strict):
    """A decoding preset as the model's publisher gives it; `reasoning` is the chat template's
    thinking switch the preset implies (None: the model has none)."""
    temperature: float = Field(ge=0)
    top_p: float = Field(gt=0, le=1)
    top_k: int = Field(ge=0)
    min_p: float = Field(0.0, ge=0, le=1)
    repetition_penalty: float = Field(1.0, gt=0)
    reasoning: bool | None = None


class Decoding(Strict):
    preset: Literal["greedy", "instruct", "thinking"] = "greedy"
    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=0)
    min_p: float | None = Field(None, ge=0, le=1)
    repetition_penalty: float | None = Field(None, gt=0)
    # llama.cpp reads a negative seed as "draw a random one": a run that could not be repeated.
    seed: int = Field(0, ge=0, description="a non-negative integer: the same seed gives the same sample")
    model_presets: dict[str, ModelPreset] = Field(
        default_factory=dict, description="the model's published presets, filled from the model catalog")

    def model_preset(self) -> ModelPreset | None:
        """The model's own values for the chosen preset (greedy is the same for every model)."""
        return self.model_presets.get(self.preset) if self.preset != "greedy" else None

    def resolved(self) -> dict[str, float | int]:
        """The preset with explicit overrides applied: what every request carries. A model that
        publishes its presets gives their values; otherwise the workbook's."""
        mine = self.model_preset()
        out = dict(DECODING_PRESETS[self.preset])
        if mine is not None:
            out.update(mine.model_dump(exclude={"reasoning"}))
        for key in out:
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out["seed"] = self.seed
        return out

    def template_fields(self) -> dict:
        """Request fields that switch the model's reasoning mode through its chat template, when
        the model's preset says which way (thinking: on; instruct: off)."""
        mine = self.model_preset()
        if mine is None or mine.reasoning is None:
            return {}
        return {"chat_template_kwargs": {"enable_thinking": mine.reasoning}}

    def describe(self) -> dict:
        """What the passport says about decoding: the values, where they come from, reasoning mode."""
        mine = self.model_preset()
        switch = self.template_fields()
        return self.resolved() | {
            "preset": self.preset,
            "preset_source": ("the model's published preset (model catalog)" if mine is not None else
                              "the workbook's preset (the model publishes none in the catalog)"
                              if self.preset != "greedy" else "greedy: the same for every model"),
            "reasoning_mode": (f"{'on' if switch['chat_template_kwargs']['enable_thinking'] else 'off'}: "
                               f"chat_template_kwargs.enable_thinking = "
                               f"{str(switch['chat_template_kwargs']['enable_thinking']).lower()}" if switch else
                               "not switched: the model's preset declares no reasoning mode")}


class SharedPrefix(Strict):
    """Prompts in `groups` groups; every prompt of a group opens with the same `tokens` tokens
    (a long system prompt or document that many requests share): what prefix caching serves.
    With `zipf_exponent` s > 0 the groups are tenants of unequal popularity: group g (from 1) is
    drawn with weight 1/g^s, fixed before the run like every other workload setting."""
    groups: int = Field(1, gt=0)
    tokens: int = Field(gt=0)
    zipf_exponent: float = Field(0.0, ge=0, le=10, description="tenant popularity skew: group g drawn with weight "
                                 "1/g^s (0: every group alike)")


class Conversation(Strict):
    """Multi-turn chats: each turn sends the whole history, including the model's real replies."""
    turns: int = Field(gt=1)


class SyntheticWorkload(Strict):
    """Seeded synthetic prompts: lengths fixed or drawn from distributions, optionally sharing
    prefixes, running as multi-turn conversations, or asking for JSON under a schema."""
    kind: Literal["synthetic"] = "synthetic"
    prompt_tokens: Length = Field(128, validate_default=True,
                                  description="tokens of user content per request (per turn)")
    output_tokens: Length = Field(64, validate_default=True, description="tokens to generate per request")
    system_prompt: str | None = None
    shared_prefix: SharedPrefix | None = None
    conversation: Conversation | None = None
    response_format: Literal["text", "json_schema"] = Field(
        "text", description="json_schema: every request asks for JSON under a fixed schema, checked on arrival")
    version: str = "synthetic-v1"

    @model_validator(mode="after")
    def _prefix_fits(self) -> "SyntheticWorkload":
        if self.shared_prefix and self.prompt_tokens.bounds()[0] < self.shared_prefix.tokens + 16:
            raise ValueError(f"shared_prefix.tokens ({self.shared_prefix.tokens}) leaves no room for each prompt's "
                             f"own text: every prompt must be at least 16 tokens longer than the shared prefix; "
                             "raise prompt_tokens or shorten the prefix")
        return self

    def capabilities_used(self) -> set[str]:
        """Canary capabilities this workload relies on: they stay in the gate whatever the campaign
        declares (a JSON workload keeps the JSON check)."""
        used = {"chat", "determinism"}
        if self.response_format == "json_schema":
            used.add("json_schema")
        if self.conversation:
            used.add("multi_turn")
        return used

    def turns(self) -> int:
        """Requests per prompt: one per turn of a conversation."""
        return self.conversation.turns if self.conversation else 1

    def max_request_tokens(self) -> int:
        """The longest request the workload can make (prompt, history and output), for the context check."""
        return self.turns() * (self.prompt_tokens.bounds()[1] + self.output_tokens.bounds()[1])


Workload = Annotated[Union[SyntheticWorkload], Field(discriminator="kind")]


class Slo(Strict):
    ttft_ms: float = Field(2000, gt=0)
    tpot_ms: float = Field(200, gt=0)
    e2e_ms: float | None = Field(None, gt=0)
    attainment: float = Field(0.99, gt=0, le=1, description="the share of requests that must meet every bound "
                              "for a load to count as inside the SLO")


class Canaries(Strict):
    """The gate: one suite, the same gating checks for every arm of the campaign."""
    suite: str = "embedded-smollm2"
    run_sweep_on_hold: bool = False
    sentinel_share: float = Field(1 / 8, ge=0, le=1, description="sentinels (gating canary prompts with known "
                                  "answers) mixed into each point, per measured request; "
                                  "at least one a point, none at 0")
    out_of_scope: dict[str, str] = Field(
        default_factory=dict,
        description="capability -> why the campaign does not need it; its checks run but do not gate")

    @model_validator(mode="after")
    def _reasons_given(self) -> "Canaries":
        blank = [k for k, why in self.out_of_scope.items() if not why.strip()]
        if blank:
            raise ValueError(f"out_of_scope {blank} has no reason; say why the campaign does not need it")
        return self


Stage = Literal["sizing", "canaries", "sweep"]


class DiscardRules(Strict):
    """Preregistered: applied mechanically to every sweep point, each discard recorded with its
    rule; the raw records are kept either way."""
    max_failed_fraction: float = Field(0.05, ge=0, le=1, description="discard a point when more requests failed")
    on_engine_restart: bool = True
    on_invalid_load: bool = True
    max_wrong_fraction: float = Field(0.0, ge=0, le=1, description="discard a point when a larger share of its "
                                      "completed sentinels answered wrongly (0: any wrong answer discards it)")


class Repetitions(Strict):
    """How many times each arm's sweep runs, interleaved across arms so slow drift on a shared
    machine lands on every arm alike. `min` repetitions always run; up to `max`, another round
    runs while a ranked comparison is still undecided (sequential stopping, preregistered here).
    By default one round more than `min` may run; a bare integer (`repetitions: 2`) fixes the count."""
    min: int = Field(2, ge=1, le=64, description="repetitions that always run (2 or more measure run-to-run noise)")
    max: int | None = Field(None, ge=1, le=64, description="the most repetitions sequential stopping may run "
                            "(left out: min + 1, one more round while a comparison is undecided; null: min)")
    order: Literal["abba", "random"] = Field(
        "abba", description="abba: the arm order reverses every round (A B, B A, A B ...); random: a seeded "
        "random order per round")
    order_seed: int = Field(0, ge=0, description="the seed of the random block order")

    @model_validator(mode="before")
    @classmethod
    def _one_more_round_unless_told(cls, data):
        """Left out, max is one round more than min. (An explicit null keeps its older meaning,
        max = min, so a run recorded before this default reads as it ran.)"""
        if isinstance(data, dict) and "max" not in data:
            low = data.get("min", 2)
            return {**data, "max": min(low + 1, 64) if isinstance(low, int) and not isinstance(low, bool) else None}
        return data

    @model_validator(mode="after")
    def _max_not_below_min(self) -> "Repetitions":
        if self.max is not None and self.max < self.min:
            raise ValueError(f"repetitions.max ({self.max}) is below repetitions.min ({self.min}); "
                             f"set max to at least {self.min}, or leave it out")
        return self

    @property
    def most(self) -> int:
        return self.max if self.max is not None else self.min

    def round_order(self, round_index: int, arms: list[str]) -> list[str]:
        """The arms' order in one round: reversed every other round (abba), or shuffled by a seed
        of its own per round (random); the same call always gives the same order (replayable)."""
        if self.order == "random":
            import random
            shuffled = list(arms)
            random.Random(f"{self.order_seed}:{round_index}").shuffle(shuffled)
            return shuffled
        return list(arms) if round_index % 2 == 0 else list(reversed(arms))

    @property
    def looks(self) -> int:
        """Interim looks at the data sequential stopping may take: one after each round from
        `min` to `max`; the decision rule's error rate is split over them (Bonferroni)."""
        return self.most - self.min + 1


ComparedName = Literal[compared_names()]  # the figures a decision may compare: measure.metric_definitions


class Decision(Strict):
    """The preregistered decision rule: a difference smaller than `min_effect` is no difference,
    and a ranking needs its whole interval (at `confidence`, adjusted for sequential looks) on one
    side of that margin."""
    min_effect: float = Field(0.05, gt=0, lt=1, description="the smallest relative difference that counts "
                              "(0.05: 5%)")
    confidence: float = Field(0.95, gt=0.5, lt=1, description="the confidence of every interval the verdict uses")
    metrics: list[ComparedName] = Field(
        default_factory=decided_names,
        min_length=1, description="the figures compared pairwise at every load (a percentile only where the "
        "sample supports it)")
    primary: ComparedName = Field(
        "output_throughput", description="the figure sequential stopping waits on: another round runs while "
        "a comparison on it is undecided")

    @model_validator(mode="after")
    def _primary_compared(self) -> "Decision":
        if self.primary not in self.metrics:
            raise ValueError(f"decision.primary {self.primary!r} is not among decision.metrics {self.metrics}; "
                             "add it to metrics or choose one of them")
        return self


class LoadGen(Strict):
    """How the load is generated: one client process holds one interpreter lock, so a rate
    past what one process sends on time needs several (see loadgen.client_processes)."""
    processes: int = Field(1, ge=1, le=64, description="client processes one point's requests are dealt to; "
                           "raise it when the sweep says the client neared one core")


class Protocol(Strict):
    stages: list[Stage] = Field(default_factory=lambda: ["sizing", "canaries", "sweep"])
    precision: Precision = Precision()
    decoding: Decoding = Decoding()
    workload: Workload = SyntheticWorkload()
    arrival: Arrival = ClosedLoop()
    context_length: int = Field(2048, gt=0)
    requests_per_point: int = Field(16, gt=0)
    warmup_requests: int = Field(2, ge=0)
    repetitions: Repetitions = Repetitions()
    seeds: list[Annotated[int, Field(ge=0)]] = Field(
        default_factory=lambda: [0], min_length=1,
        description="the workload seed of each repetition, cycled when there are more repetitions than seeds")
    decision: Decision = Decision()
    prefix_cache: Literal["cold", "warm"] = "cold"
    cache_salt: bool = Field(False, description="under prefix_cache cold: open each point's prompts with a salt "
                             "unique to the arm, point and run, so no arm is served from what another sent (a hosted "
                             "API's prompt cache cannot be flushed); the prompt digests leave the salt out")
    request_timeout_s: float = Field(120, gt=0)
    slo: Slo = Slo()
    canaries: Canaries = Canaries()
    discard_rules: DiscardRules = DiscardRules()
    loadgen: LoadGen = LoadGen()
    capacity: CapacitySearch | None = Field(None, description="search each arm's highest concurrency inside the "
                                            "SLO in every repetition of its sweep (None: no search)")

    @field_validator("repetitions", mode="before")
    @classmethod
    def _count_means_fixed(cls, v):
        """`repetitions: 3` is exactly three repetitions, no sequential stopping."""
        if isinstance(v, bool):
            return v  # refused by the model with the field named
        if isinstance(v, int):
            return {"min": v, "max": v}
        return v

    @model_validator(mode="after")
    def _salt_only_when_cold(self) -> "Protocol":
        if self.cache_salt and self.prefix_cache != "cold":
            raise ValueError("cache_salt keeps arms from each other's cache, which a warm protocol primes on purpose; "
                             "set prefix_cache: cold, or remove cache_salt")
        return self

    @model_validator(mode="after")
    def _fits_context(self) -> "Protocol":
        w = self.workload
        if why := self.arrival.over_context(self.context_length):
            raise ValueError(why)
        need = w.max_request_tokens()
        if need > self.context_length:
            what = "its last turn" if w.conversation else "its longest request"
            raise ValueError(
                f"workload needs up to {need} tokens for {what} (prompt + output"
                f"{', times turns' if w.conversation else ''}) but context_length is {self.context_length}; "
                "raise context_length or shorten the workload (lower the length bounds)")
        kept = sorted(set(self.canaries.out_of_scope) & w.capabilities_used())
        if kept:
            raise ValueError(f"canaries.out_of_scope declares {kept} out of scope, but the workload uses it "
                             f"(response_format, conversation or plain chat): a capability the workload uses "
                             f"stays in the gate; remove {kept} from out_of_scope")
        if self.canaries.out_of_scope and "canaries" in self.stages:
            from stackbook.gate.canaries import load_suite, out_of_scope_checks
            try:
                suite, _ = load_suite(self.canaries.suite)
            except FileNotFoundError:
                suite = None  # the suite's own error comes when the canaries run
            if suite is not None:
                out_of_scope_checks(suite, self.canaries.out_of_scope)
        if "sweep" in self.stages and "canaries" not in self.stages and not self.canaries.run_sweep_on_hold:
            raise ValueError(f"stages {self.stages} would skip the sweep: it runs only after the canaries pass; "
                             "add canaries (stages: [sizing, canaries, sweep]), or set "
                             "canaries.run_sweep_on_hold: true to measure with every arm labelled 'not gated'")
        if self.capacity is not None and not isinstance(self.arrival, ClosedLoop):
            raise ValueError(f"capacity searches closed-loop concurrency, and arrival.kind is {self.arrival.kind!r}; "
                             "set arrival.kind: closed_loop, or remove capacity")
        if self.capacity is not None and self.slo.attainment >= 1:
            raise ValueError("capacity cannot prove slo.attainment 1: no sample shows that every request ever will "
                             "meet the SLO; state a share below 1 (e.g. 0.99), or remove capacity")
        if self.capacity is not None:
            from stackbook.capacity.verdict import requests_to_prove
            need = requests_to_prove(self.slo.attainment)
            if self.capacity.max_requests < need:
                raise ValueError(f"capacity.max_requests {self.capacity.max_requests} cannot prove slo.attainment "
                                 f"{self.slo.attainment}: even that many requests all inside the SLO leave its 95% "
                                 f"lower bound below it, so no load could be proven inside; set max_requests to at "
                                 f"least {need}, or lower slo.attainment")
        if self.capacity is not None and "sweep" not in self.stages:
            raise ValueError(f"capacity runs with the sweep, and stages {self.stages} leave it out; add sweep to "
                             "stages, or remove capacity")
        return self

    def seed_of(self, repetition: int) -> int:
        """The workload seed of one repetition (the seeds cycle)."""
        return self.seeds[repetition % len(self.seeds)]

    def requests_at(self, level: LoadLevel) -> int:
        """HTTP requests sent at one load level: every turn of every prompt."""
        return self.arrival.prompts_at(level, self) * self.workload.turns()

    def requests_per_repetition(self) -> int:
        """HTTP requests one repetition of an arm's sweep sends: every level."""
        return sum(self.requests_at(level) for level in self.arrival.load_levels())

    def requests_per_arm(self) -> int:
        """HTTP requests one arm's sweep sends at the least: every level, `min` repetitions."""
        return self.repetitions.min * self.requests_per_repetition()
