"""The three questions before any benchmark: hardware, workload shape, ops capacity.

Pure functions: the 00_decide notebook turns a team's answers into what fits on its hardware (and
what to change first when nothing does), the peak demand its users put in flight, a shortlist
with reasons, and the managed-versus-owned cost arithmetic.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from stackbook import sizing


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


def shortlist(a: Answers) -> list[dict]:
    """Candidate stacks with the reason each is on the list, and what every answer asks of it;
    the benchmark decides among them."""
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
    if managed_endpoint_fits(a):
        note = "thinking multiplies output tokens, and the metered bill with them" if a.thinking else "-"
        out.append({"stack": "managed endpoint",
                    "why": f"{a.volume} volume and nobody to upgrade drivers or watch p99: pay per token, "
                           "compare with the arithmetic below", "for your answers": note})
    return out


def what_each_answer_changes(a: Answers) -> list[dict]:
    """Every answer of the workload-shape and ops questions with what it changes, whichever stack
    is chosen: the engine-independent half of the shortlist's reasons."""
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
         else "steady: owned cards stay busy"),
    ]
    return [{"answer": q, "value": v, "what it changes": w} for q, v, w in rows]


def managed_endpoint_fits(a: Answers) -> bool:
    """The seed's rule: low, spiky or unpredictable volume *and* no ops rotation. Either alone is
    not enough: steady volume fills owned cards, and a team with an ops rotation can run them."""
    return a.volume in ("spiky", "low") and a.ops_engineers < 1 and not a.on_call


# --------------------------------------------------------------------------- hardware

CARD_COUNTS = (1, 2, 4, 8)


def _live(g, hw, cards: int, context_tokens: int, precision: str, artifacts: dict, kv_precision: str) -> dict:
    """size_model for `cards` of one device (tensor parallel across them), or zero when nothing fits."""
    art = artifacts.get(precision, {}).get("bytes")
    try:
        r = sizing.size_model(g, memory_bytes=hw.usable_bytes or hw.memory_bytes, context_tokens=context_tokens,
                              weights_precision=precision, kv_precision=kv_precision, artifact_bytes=art,
                              bandwidth=hw.bandwidth, tensor_parallel=cards)
        return {"live": r["max_live_sequences"], "pool": r["cache_pool_bytes"], "tok_s": r.get("roofline_decode_tok_s")}
    except ValueError:
        return {"live": 0, "pool": 0, "tok_s": None}


def sizing_targets() -> list[str]:
    """The catalog's devices the tables offer as options (silicon examples excluded)."""
    return [k for k, hw in sizing.accelerator_catalog().items() if hw.sizing_target]


def hardware_table(g, context_tokens: int, precisions=("bf16", "fp8", "q4_k_m"), artifacts: dict | None = None,
                   kv_precision: str = "bf16", accelerators: list[str] | None = None,
                   cards=CARD_COUNTS) -> list[dict]:
    """For each device, card count (sharded tensor parallel, up to what the device allows) and weight
    precision: the weights per card, the cache pool per card, and the live sequences of
    `context_tokens` (each sequence is split across the cards, so the count is the deployment's)."""
    artifacts = artifacts or {}
    cat = sizing.accelerator_catalog()
    rows = []
    for key in accelerators or sizing_targets():
        hw = cat[key]
        for n in (c for c in cards if c <= hw.max_cards):
            for prec in precisions:
                w = sizing.weight_bytes(g.num_parameters, prec, artifacts.get(prec, {}).get("bytes"))
                r = _live(g, hw, n, context_tokens, prec, artifacts, kv_precision)
                rows.append({"accelerator": hw.name, "cards": n, "weights": prec, "weights GB": round(w / 1e9, 1),
                             "memory GB per card": round(hw.memory_bytes / 1e9),
                             "pool GiB per card": round(r["pool"] / sizing.GiB, 1), "live sequences": r["live"],
                             "fits": r["live"] >= 1,
                             "decode bound tok/s": round(r["tok_s"]) if r["tok_s"] and r["live"] else None})
    return rows


@dataclass(frozen=True)
class FitStep:
    """One configuration tried, in the seed's order."""
    step: str               # "the hardware you have" | "more cards"
    cards: int
    precision: str
    live_sequences: int
    enough: bool


@dataclass(frozen=True)
class FitPlan:
    accelerator: str
    needed_sequences: int
    tried: tuple[FitStep, ...]
    chosen: FitStep | None
    verdict: str


def fit_plan(g, accelerator: str, cards: int, context_tokens: int, precisions=("bf16", "fp8", "q4_k_m"),
             artifacts: dict | None = None, kv_precision: str = "bf16", needed_sequences: int = 1) -> FitPlan:
    """The seed's order when the model does not fit: first the widest precision that fits on the
    cards you have (quantize to fit), then more cards of the same kind, and only then a smaller model.
    Precisions are tried widest first whatever order they are given in."""
    artifacts = artifacts or {}
    hw = sizing.accelerator(accelerator)
    if cards > hw.max_cards:
        raise ValueError(f"{accelerator} shards across at most {hw.max_cards} card(s) in the catalog; "
                         f"{cards} were asked for")
    order = sorted(precisions, key=lambda p: -sizing.weight_bytes(g.num_parameters, p,
                                                                  artifacts.get(p, {}).get("bytes")))
    tried: list[FitStep] = []

    def attempt(step: str, n: int) -> FitStep | None:
        for prec in order:
            live = _live(g, hw, n, context_tokens, prec, artifacts, kv_precision)["live"]
            tried.append(FitStep(step, n, prec, live, live >= needed_sequences))
            if live >= needed_sequences:
                return tried[-1]
        return None

    what = f"{needed_sequences} live sequence{'s' if needed_sequences != 1 else ''} of {context_tokens:,} tokens"
    have = f"{cards} x {hw.name}"
    chosen = attempt("the hardware you have", cards)
    if chosen and chosen.precision == order[0]:
        verdict = (f"{have} holds {chosen.precision} weights with {chosen.live_sequences} live sequences "
                   f"(at least {what} needed): no need to quantize.")
    elif chosen:
        wider = order[:order.index(chosen.precision)]
        verdict = (f"Quantize: {chosen.precision} is the widest precision with which {have} holds {what} "
                   f"({chosen.live_sequences}); {' and '.join(wider)} {'does' if len(wider) == 1 else 'do'} not. "
                   "Check its quality before a smaller model is considered.")
    else:
        for n in (c for c in CARD_COUNTS if cards < c <= hw.max_cards):
            chosen = attempt("more cards", n)
            if chosen:
                break
        if chosen:
            verdict = (f"No precision of {', '.join(order)} holds {what} on {have}; {chosen.cards} cards at "
                       f"{chosen.precision} hold {chosen.live_sequences}: add cards before choosing a smaller model.")
        else:
            verdict = (f"Neither quantizing ({', '.join(order)}) nor sharding up to {max(hw.max_cards, cards)} "
                       f"cards holds {what} on {hw.name}: choose a smaller model.")
    return FitPlan(hw.name, needed_sequences, tuple(tried), chosen, verdict)


def fit_plan_rows(plan: FitPlan) -> list[dict]:
    """Every configuration fit_plan tried, in order, the chosen one marked."""
    return [{"order": i + 1, "step": s.step, "cards": s.cards, "weights": s.precision,
             "live sequences": s.live_sequences, "enough": s.enough, "chosen": s == plan.chosen}
            for i, s in enumerate(plan.tried)]


# --------------------------------------------------------------------------- the silicon

@dataclass(frozen=True)
class SiliconExample:
    """A device the seed uses to show the memory wall: capacity against bandwidth."""
    key: str | None         # its catalog entry (figures and source there), or None when no figure is given
    lesson: str
    source: str = ""        # only when there is no catalog entry


SILICON_EXAMPLES = (
    SiliconExample("b200", "GPUs scale capacity by adding devices; HBM bandwidth bounds decode"),
    SiliconExample("cerebras-wse-3", "weights kept in SRAM beside the compute: vast bandwidth, little capacity, "
                                     "so large models are partitioned at layer boundaries across systems"),
    SiliconExample(None, "Google TPU 8i: more on-chip SRAM for KV caches, a Collectives Acceleration Engine and the "
                         "Boardfly topology, to cut memory movement and communication",
                   source="the seed (Mapping the stack), after Google's TPU 8i overview: vendor-reported targets, "
                          "no figures given"),
)


def silicon_table(weights_bytes: float) -> list[dict]:
    """The seed's silicon examples: memory, bandwidth, the time to read the whole memory once, and
    the devices needed just to hold `weights_bytes` (a capacity floor: no cache, no buffers)."""
    cat = sizing.accelerator_catalog()
    rows = []
    for ex in SILICON_EXAMPLES:
        hw = cat.get(ex.key) if ex.key else None
        if hw is None:
            rows.append({"device": ex.lesson.split(":")[0], "memory GB": None, "bandwidth TB/s": None,
                         "ms to read all memory": None, "devices to hold the weights": None,
                         "lesson": ex.lesson.split(": ", 1)[-1], "source": ex.source})
            continue
        rows.append({"device": hw.name, "memory GB": round(hw.memory_bytes / 1e9),
                     "bandwidth TB/s": hw.bandwidth / 1e12,
                     "ms to read all memory": round(hw.memory_bytes / hw.bandwidth * 1e3, 4),
                     "devices to hold the weights": math.ceil(weights_bytes / hw.memory_bytes),
                     "lesson": ex.lesson, "source": hw.source})
    return rows


# --------------------------------------------------------------------------- demand

@dataclass(frozen=True)
class PeakDemand:
    """Requests in flight from daily users, by Little's law (L = arrival rate x time in system),
    applied twice: to sessions (open for `session_minutes`) and to requests (in flight for the
    part of a session not spent thinking)."""
    daily_users: int
    sessions_per_user: float
    session_minutes: float
    requests_per_session: int
    think_time_s: float
    working_hours: float
    peak_to_average: float

    @property
    def seconds_per_request(self) -> float:
        """A session is requests x (reply time + think time): the reply time is what is left."""
        return self.session_minutes * 60 / self.requests_per_session - self.think_time_s

    @property
    def sessions_per_s(self) -> float:
        return self.daily_users * self.sessions_per_user / (self.working_hours * 3600)

    @property
    def concurrent_sessions(self) -> float:
        return self.sessions_per_s * self.session_minutes * 60

    @property
    def requests_per_s(self) -> float:
        return self.sessions_per_s * self.requests_per_session

    @property
    def mean_in_flight(self) -> float:
        return self.requests_per_s * self.seconds_per_request

    @property
    def peak_in_flight(self) -> float:
        return self.mean_in_flight * self.peak_to_average

    @property
    def peak_sessions(self) -> int:
        """Sessions open at once at the peak: the concurrent users the shortlist reads."""
        return max(1, math.ceil(self.concurrent_sessions * self.peak_to_average))


def peak_demand(daily_users: int, session_minutes: float, requests_per_session: int, think_time_s: float,
                working_hours: float = 8.0, peak_to_average: float = 3.0, sessions_per_user: float = 1.0) -> PeakDemand:
    d = PeakDemand(daily_users, sessions_per_user, session_minutes, requests_per_session, think_time_s,
                   working_hours, peak_to_average)
    if d.seconds_per_request <= 0:
        raise ValueError(f"{requests_per_session} requests with {think_time_s} s of thinking each take longer than "
                         f"a {session_minutes}-minute session: lengthen the session or shorten the think time")
    return d


def demand_table(d: PeakDemand) -> list[dict]:
    """Each step of the Little's-law arithmetic with how it was computed."""
    return [
        {"quantity": "sessions per second", "value": round(d.sessions_per_s, 5),
         "how": f"{d.daily_users} users x {d.sessions_per_user:g} sessions / {d.working_hours:g} h"},
        {"quantity": "sessions open at once (mean)", "value": round(d.concurrent_sessions, 2),
         "how": f"Little's law: sessions per second x {d.session_minutes * 60:g} s per session"},
        {"quantity": "seconds per reply", "value": round(d.seconds_per_request, 2),
         "how": f"{d.session_minutes * 60:g} s / {d.requests_per_session} requests - {d.think_time_s:g} s thinking"},
        {"quantity": "requests per second", "value": round(d.requests_per_s, 4),
         "how": f"sessions per second x {d.requests_per_session} requests"},
        {"quantity": "requests in flight (mean)", "value": round(d.mean_in_flight, 2),
         "how": "Little's law: requests per second x seconds per reply"},
        {"quantity": "requests in flight (peak)", "value": round(d.peak_in_flight, 2),
         "how": f"mean x peak-to-average {d.peak_to_average:g}"},
        {"quantity": "sessions open at once (peak)", "value": d.peak_sessions,
         "how": f"mean x {d.peak_to_average:g}, rounded up"},
    ]


def demand_sentence(d: PeakDemand, live_sequences: int, context_tokens: int) -> str:
    """Peak requests in flight set against the live sequences the memory arithmetic allows."""
    peak = math.ceil(d.peak_in_flight)
    head = (f"{d.daily_users} daily users over a working day of {d.working_hours:g} hours keep **{d.concurrent_sessions:.1f} "
            f"sessions** open on average; with {d.requests_per_session} requests per "
            f"{d.session_minutes:g}-minute session and {d.think_time_s:g} s of thinking between them, a reply takes "
            f"{d.seconds_per_request:.1f} s and **{d.mean_in_flight:.2f} requests** are in flight on average, "
            f"**{d.peak_in_flight:.2f}** at a peak {d.peak_to_average:g} times the average. ")
    if live_sequences >= peak:
        return head + (f"The arithmetic allows **{live_sequences} live sequences** of {context_tokens:,} tokens, "
                       f"{live_sequences / peak:.0f} times the peak: the cache is not what limits this team.")
    return head + (f"The arithmetic allows only **{live_sequences} live sequences** of {context_tokens:,} tokens, "
                   f"short of the peak of {peak}: quantize, add cards, or shorten the context.")


# --------------------------------------------------------------------------- ops and money

def managed_vs_owned(tokens_per_day: float, price_per_million_tokens: float, card_hour_price: float,
                     cards: int = 1, hours_per_day: float = 24.0, ops_hours_per_day: float = 0.0,
                     engineer_hour_price: float = 0.0) -> dict:
    """Daily cost of a metered endpoint against owning cards (plus the people who run them),
    and the token volume at which the two cost the same."""
    managed = tokens_per_day / 1e6 * price_per_million_tokens
    owned = cards * card_hour_price * hours_per_day + ops_hours_per_day * engineer_hour_price
    break_even = owned / price_per_million_tokens * 1e6 if price_per_million_tokens > 0 else float("inf")
    return {"managed_per_day": managed, "owned_per_day": owned, "break_even_tokens_per_day": break_even,
            "cheaper": "managed endpoint" if managed < owned else "owned cards"}


def describe_model(g) -> str:
    """One Markdown line: size, layers by kind, trained context."""
    return (f"**{g.name}**: {g.num_parameters / 1e9:.1f} B parameters, {g.num_layers} layers "
            f"({g.kv_layers} keep a KV cache, {g.linear_layers} linear-attention with a fixed state), "
            f"trained context {g.max_context:,} tokens.")


def cost_by_volume(volumes, price_per_million_tokens: float, card_hour_price: float, **owned) -> list[dict]:
    """managed_vs_owned at each daily token volume, to show where the cheaper option flips.
    `owned` takes managed_vs_owned's keywords (cards, hours_per_day, ops and engineer prices)."""
    rows = []
    for v in volumes:
        c = managed_vs_owned(v, price_per_million_tokens, card_hour_price, **owned)
        rows.append({"tokens per day": f"{v:,.0f}", "managed per day": round(c["managed_per_day"], 2),
                     "owned per day": round(c["owned_per_day"], 2), "cheaper": c["cheaper"]})
    return rows


def cost_summary(cost: dict, tokens_per_day: float) -> str:
    """managed_vs_owned's answer in one Markdown paragraph."""
    return (f"Managed: **{cost['managed_per_day']:,.2f} per day** for {tokens_per_day:,.0f} tokens. "
            f"Owned: **{cost['owned_per_day']:,.2f} per day** (card and operations). "
            f"Break-even at **{cost['break_even_tokens_per_day']:,.0f} tokens per day**; "
            f"at this volume the cheaper option is the **{cost['cheaper']}**.")
