"""Questions two and three, workload shape and ops capacity: the shortlist with reasons, what each
answer changes whichever stack is chosen, and when the managed endpoint belongs on the list."""
from __future__ import annotations

from dataclasses import dataclass

from stackbook.engines import registry
from stackbook.engines.facts import DecisionFacts


@dataclass(frozen=True)
class Answers:
    """What a team knows before choosing: the seed's three questions, every dimension of the second."""
    platform: str = "nvidia"            # nvidia | apple | amd | cpu | mixed
    gpus: int = 1                       # cards one deployment may use
    concurrent_users: int = 1           # sessions open at once at the peak (1: one person at a keyboard)
    shared_prefix: bool = False         # a system prompt or document every request repeats
    json_output: bool = False           # output must validate against a schema
    context_tokens: int = 8192
    images: bool = False
    thinking: bool = False              # thinking mode on: long generations
    ops_engineers: float = 0.0          # people who can own a serving deployment
    on_call: bool = False
    volume: str = "steady"              # steady | spiky | low
    throughput_dominant_cost: bool = False


# Owned capacity whose mean load fills less than this share of its live sequences stands mostly idle.
MOSTLY_IDLE = 0.5


@dataclass(frozen=True)
class Arithmetic:
    """What the notebook's own arithmetic says, for the shortlist to follow: the daily cost of
    each option at the stated volume, and the mean requests in flight against the live sequences
    the owned hardware holds."""
    tokens_per_day: float
    managed_per_day: float
    owned_per_day: float
    mean_in_flight: float
    live_sequences: int

    @property
    def busy_fraction(self) -> float:
        return self.mean_in_flight / self.live_sequences if self.live_sequences else 1.0

    @property
    def managed_cheaper(self) -> bool:
        return self.managed_per_day < self.owned_per_day

    @property
    def buys_idle_silicon(self) -> bool:
        """The seed's case: the endpoint costs less at this volume and owned capacity would stand mostly idle."""
        return self.managed_cheaper and self.busy_fraction < MOSTLY_IDLE

    def reason(self) -> str:
        ratio = self.owned_per_day / self.managed_per_day if self.managed_per_day else float("inf")
        return (f"At {self.tokens_per_day:,.0f} tokens a day the endpoint costs {self.managed_per_day:,.2f} against "
                f"{self.owned_per_day:,.2f} owned ({ratio:,.0f} times less), and owned capacity would stand "
                f"{1 - self.busy_fraction:.0%} idle ({self.mean_in_flight:.2f} requests in flight on average against "
                f"{self.live_sequences} live sequences): owning a card would be buying idle silicon")


# The seed contrasts contexts of "two thousand tokens or two hundred thousand"; past this line a
# sequence's cache, not the weights, drives the memory budget and the engines' context limits matter.
LONG_CONTEXT_TOKENS = 32_768


# What each engine offers for each workload dimension is stated by its kind (engines/facts.py);
# MAX is on the shortlist for a mixed fleet but is no kind stackbook runs, so the notes establish nothing of it.
MAX = DecisionFacts(stack="MAX")  # listed after every kind


def engine_facts() -> dict[str, DecisionFacts]:
    """Each shortlisted stack's facts, by its name on the shortlist."""
    return {**{a.decision.stack: a.decision for a in registry.decision_kinds()}, MAX.stack: MAX}


def _answer_notes(stack: str, a: Answers) -> list[str]:
    """What each answer asks of one engine: the feature the notes found, or a check for the campaign."""
    facts = engine_facts()[stack]
    notes = []

    def need(what: str, fact: str | None, check: str) -> None:
        notes.append(f"{what}: {fact}" if fact else f"{what}: not established for {stack}; {check}")

    if a.gpus > 1:
        need(f"{a.gpus} GPUs", facts.parallel, "confirm it shards this model before the campaign")
    if a.context_tokens >= LONG_CONTEXT_TOKENS:
        need(f"{a.context_tokens:,}-token context", facts.long_context,
             "read the realized context in its log (the long_context canary)")
    if a.images:
        need("images", facts.images, "confirm it serves this model's vision inputs before the campaign")
    if a.thinking:
        need("thinking mode", facts.reasoning, "check the thinking is separated from the answer")
    if a.json_output:
        need("JSON output", facts.structured_output, "the json_schema canary decides")
    if a.shared_prefix:
        need("shared prefix", facts.prefix_cache, "measure with a warm and a cold cache")
    return notes


def shortlist(a: Answers, arithmetic: Arithmetic | None = None) -> list[dict]:
    """Candidate stacks with the reason each is on the list, and what every answer asks of it;
    the benchmark decides among them. The managed endpoint joins by the seed's rule, or when the
    arithmetic says owning would buy idle silicon."""
    why: dict[str, str] = {}
    for kind in registry.decision_kinds():
        reason = kind.shortlist_reason(a)
        if reason is not None:
            why[kind.decision.stack] = reason
    if a.platform == "mixed":
        why["MAX"] = "a heterogeneous fleet, if a young ecosystem is acceptable"

    out = [{"stack": s, "why": w, "for your answers": "; ".join(_answer_notes(s, a)) or "-"} for s, w in why.items()]
    note = "thinking multiplies output tokens, and the metered bill with them" if a.thinking else "-"
    if arithmetic is not None and arithmetic.buys_idle_silicon:
        out.insert(0, {"stack": "managed endpoint", "why": arithmetic.reason(),
                       "for your answers": note})
    elif managed_endpoint_fits(a):
        out.append({"stack": "managed endpoint",
                    "why": f"{a.volume} volume and nobody to upgrade drivers or watch p99: pay per token, "
                           "compare with the arithmetic below", "for your answers": note})
    return out


def what_each_answer_changes(a: Answers, arithmetic: Arithmetic | None = None) -> list[dict]:
    """Every answer of the workload-shape and ops questions with what it changes, whichever stack
    is chosen: the engine-independent half of the shortlist's reasons. A steady volume keeps
    owned cards busy only where the arithmetic does not show them standing mostly idle."""
    long = a.context_tokens >= LONG_CONTEXT_TOKENS
    rows = [
        ("concurrent users", a.concurrent_users,
         "one person at a keyboard: a local runner is fine, there is no batch to fill" if a.concurrent_users <= 1
         else "a batching server: continuous batching and paged KV keep the sequences in flight together"),
        ("GPUs", a.gpus,
         f"a model sharded across {a.gpus} cards: tensor or pipeline parallel support decides the engine"
         if a.gpus > 1 else "one card: no sharding"),
        ("context tokens", f"{a.context_tokens:,}",
         "a long context: each sequence's KV cache, not the weights, fills memory; engines can realize far less "
         "than they are configured for (the seed's 262,144 configured, 42,624 realized), so read it from the log"
         if long else "a short context: the weights dominate memory; the KV budget is in the tables above"),
        ("shared prefix", a.shared_prefix,
         "its prefill is computed once and reused: state whether the cache was warm, since one replayed prompt "
         "measures a cache, not a model" if a.shared_prefix else "unique prompts: no prefix reuse to count on"),
        ("JSON output", a.json_output,
         "constrained decoding, and the json_schema canary gates every arm before timing" if a.json_output
         else "free text: no schema to enforce"),
        ("images", a.images,
         "image inputs: the engine must serve this model's vision tower, whose weights a text-only size leaves out"
         if a.images else "text only"),
        ("thinking mode", a.thinking,
         "long generations: decode dominates, the context must hold the thinking, and every arm runs the same "
         "preset, since thinking moves throughput on its own" if a.thinking
         else "the instruct preset: shorter replies"),
        ("ops", f"{a.ops_engineers:g} engineers" + (", on call" if a.on_call else ""),
         "someone to upgrade drivers and watch p99" if a.ops_engineers >= 1 or a.on_call
         else "nobody to run a stack: weigh the managed endpoint's bill against owned cards"),
        ("volume", a.volume,
         "low or unpredictable: owned cards would sit idle" if a.volume in ("spiky", "low")
         else f"steady, but owned capacity would stand {1 - arithmetic.busy_fraction:.0%} idle at this volume"
         if arithmetic is not None and arithmetic.busy_fraction < MOSTLY_IDLE
         else "steady: owned cards stay busy"),
    ]
    return [{"answer": q, "value": v, "what it changes": w} for q, v, w in rows]


def managed_endpoint_fits(a: Answers) -> bool:
    """The seed's rule: low, spiky or unpredictable volume *and* no ops rotation. Either alone is
    not enough: steady volume fills owned cards, and a team with an ops rotation can run them."""
    return a.volume in ("spiky", "low") and a.ops_engineers < 1 and not a.on_call
