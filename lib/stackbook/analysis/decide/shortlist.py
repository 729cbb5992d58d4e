"""Questions two and three, workload shape and ops capacity: the shortlist with reasons, what each
answer changes whichever stack is chosen, and when the managed endpoint belongs on the list."""
from __future__ import annotations

from dataclasses import dataclass


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


@dataclass(frozen=True)
class EngineFacts:
    """What an engine offers for each workload dimension, as the research notes found it in its
    flags and docs (None: the notes do not establish it, so the campaign must check it)."""
    parallel: str | None
    long_context: str | None
    reasoning: str | None
    images: str | None
    structured_output: str | None
    prefix_cache: str | None


ENGINE_FACTS_SOURCE = ("research notes on the GPU engines (vLLM v0.33.0, SGLang v0.5.23, TensorRT-LLM PyTorch "
                       "backend, llama.cpp server README): flags and defaults as each release documents them")
ENGINE_FACTS: dict[str, EngineFacts] = {
    "vLLM": EngineFacts(
        parallel="tensor and pipeline parallel (`--tensor-parallel-size`, `-pp`, `-dp`)",
        long_context="`--max-model-len` (-1 fits it to memory), chunked prefill on by default",
        reasoning="`--reasoning-parser` splits the thinking from the answer",
        images="multimodal inputs, with its own multimodal and encoder caches",
        structured_output="structured outputs (xgrammar, guidance, outlines, lm-format-enforcer)",
        prefix_cache="prefix caching, on by default"),
    "SGLang": EngineFacts(
        parallel="tensor, data, pipeline and expert parallel (`--tp-size`, `--dp-size`, `--pp-size`, `--ep-size`)",
        long_context="`--context-length` and `--chunked-prefill-size`; on hybrid models it splits memory between "
                     "state and KV, so realized KV tokens can fall far below the configured context",
        reasoning="`--reasoning-parser` (auto in v0.5.23)",
        images="image inputs (its bench_serving ships image and MMMU datasets)",
        structured_output="`--grammar-backend` (xgrammar, outlines, llguidance)",
        prefix_cache="radix-tree prefix reuse"),
    "TensorRT-LLM": EngineFacts(
        parallel="tensor, pipeline, expert and context parallel (`--tp_size`, `--pp_size`, `--ep_size`, `--cp_size`)",
        long_context="`--max_seq_len`; chunked prefill off by default, and `--max_num_tokens` caps the prompt "
                     "length unless it is on",
        reasoning="`--reasoning_parser`",
        images=None,
        structured_output="`guided_decoding_backend` (xgrammar, llguidance); unset, response_format is not enforced",
        prefix_cache=None),
    "llama.cpp": EngineFacts(
        parallel="`-sm layer|row|tensor` splits across cards, by layers by default: not tensor parallel in vLLM's "
                 "sense",
        long_context="`-c` (0: the model's trained context); `--fit` shrinks an unset context to fit memory, so pin "
                     "it; each slot gets n_ctx / n_parallel without unified KV",
        reasoning=None,
        images=None,
        structured_output="per-request `json_schema` or `grammar` (GBNF)",
        prefix_cache="`cache_prompt`, on by default"),
    "vLLM (CPU build)": EngineFacts(
        parallel=None, long_context="`--max-model-len`, chunked prefill on by default",
        reasoning="`--reasoning-parser`", images=None,
        structured_output="structured outputs (xgrammar, guidance, outlines, lm-format-enforcer)",
        prefix_cache="prefix caching, on by default"),
    "MLX": EngineFacts(parallel=None, long_context=None, reasoning=None, images=None, structured_output=None,
                       prefix_cache=None),
    "MAX": EngineFacts(parallel=None, long_context=None, reasoning=None, images=None, structured_output=None,
                       prefix_cache=None),
}


def _answer_notes(stack: str, a: Answers) -> list[str]:
    """What each answer asks of one engine: the feature the notes found, or a check for the campaign."""
    facts = ENGINE_FACTS[stack]
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
    one_user = a.concurrent_users <= 1
    many = f"{a.concurrent_users} concurrent users"

    if a.platform == "apple":
        runner = ("one machine, one user: a local runner is the seed's answer" if one_user else
                  f"{many}: the seed pairs local runners with one user, so the load sweep must show they hold")
        why["MLX"] = f"Apple silicon: the framework built for its unified memory; {runner}"
        why["llama.cpp"] = f"Apple silicon with Metal: GGUF quants and a model registry's convenience; {runner}"
    if a.platform == "cpu":
        why["llama.cpp"] = "CPU-only: quantized GGUF and hand-written CPU kernels" + (
            "; one user needs no batching" if one_user else "")
        if not one_user:
            why["vLLM (CPU build)"] = f"CPU-only with {many}: continuous batching and paged KV on the CPU"
    if a.platform in ("nvidia", "amd", "mixed"):
        why["vLLM"] = ("the default for serving an API on GPUs: broad model support, continuous batching, paged KV"
                       + (f", for {many}" if not one_user else ""))
    if a.platform == "nvidia" and one_user:
        why["llama.cpp"] = "one user at a keyboard: a local runner is enough, there is no batch to fill"
    prefix_matters = a.shared_prefix and not one_user
    if a.platform in ("nvidia", "amd") and (prefix_matters or a.json_output):
        jobs = [w for w, on in ((f"long prefixes shared across {many} (radix-tree reuse)", prefix_matters),
                                ("output that must validate against a schema (fast constrained decoding)",
                                 a.json_output)) if on]
        why["SGLang"] = f"{' and '.join(jobs)}: the two problems it was built around"
    if a.platform == "nvidia" and a.throughput_dominant_cost and a.ops_engineers >= 1:
        why["TensorRT-LLM"] = ("NVIDIA-only fleet where throughput is the dominant cost and there is engineering "
                               "time for build and compatibility validation")
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
         "preset, since thinking moves throughput on its own" if a.thinking else "the instruct preset: shorter replies"),
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
