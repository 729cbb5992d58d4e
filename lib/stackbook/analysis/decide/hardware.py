"""Question one, hardware: what fits on the cards a team has, in the seed's order (quantize, then
add cards, then a smaller model), the catalog's other options, and the memory wall."""
from __future__ import annotations

import math
from dataclasses import dataclass

from stackbook import sizing


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


def describe_model(g) -> str:
    """One Markdown line: size, layers by kind, trained context."""
    return (f"**{g.name}**: {g.num_parameters / 1e9:.1f} B parameters, {g.num_layers} layers "
            f"({g.kv_layers} keep a KV cache, {g.linear_layers} linear-attention with a fixed state), "
            f"trained context {g.max_context:,} tokens.")
