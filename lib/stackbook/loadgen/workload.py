"""Prompts of a stated token length, built deterministically from a seed."""
from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple


_WORDS = ("river mountain signal harbor lantern orchard meadow copper violet engine quiet morning "
          "window garden thunder silver station pocket marble ribbon canyon feather circuit harvest "
          "compass velvet glacier beacon tunnel prairie falcon cedar lattice ember pillar saddle "
          "anchor quartz willow timber mosaic canvas valley breeze puzzle summit orbit meadowlark").split()


# The schema every `response_format: json_schema` request carries; small enough for any model.
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"words": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 5},
                   "count": {"type": "integer"}},
    "required": ["words", "count"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class PromptSpec:
    index: int
    messages: list
    prompt_tokens_client: int
    output_tokens: int | None = None   # None: the protocol's fixed output length
    group: int | None = None           # shared-prefix group
    follow_ups: tuple = ()             # conversations: (user content, its tokens, output tokens) per later turn
    schema: dict | None = None         # the reply must be JSON under this schema
    sentinel: str | None = None        # a canary check's id: a known-answer request mixed into the load

    @property
    def natural_end(self) -> bool:
        """The reply is expected to end by itself (JSON closing, a sentinel's answer), so its
        length is bounded, not forced."""
        return self.schema is not None or self.sentinel is not None


_WORDS_AND_PUNCTUATION = re.compile(r"\w+|[^\w\s]")


class _Encoding(NamedTuple):
    """What encode returns, shaped like a tokenizers Encoding: its ids. (One class for every call:
    defining a class per call cost a fifth of the load generator's CPU, once per streamed chunk.)"""
    ids: list[str]


class ApproximateTokenizer:
    """Counts words and punctuation: for endpoints whose tokenizer is not available locally, and
    for the calibration server (one word per streamed token). Client token counts are then
    approximate; the server's usage counts remain exact."""

    def encode(self, text, add_special_tokens=False):
        return _Encoding(_WORDS_AND_PUNCTUATION.findall(text))

    def decode(self, ids):
        return " ".join(ids)


@lru_cache(maxsize=8)
def client_tokenizer(hf_dir: str):
    """The model's own tokenizer, loaded from its tokenizer.json (no hub access)."""
    from tokenizers import Tokenizer

    path = Path(hf_dir) / "tokenizer.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: the client tokenizer is read from the model directory")
    return Tokenizer.from_file(str(path))


def count_tokens(tokenizer, text: str) -> int:
    return len(tokenizer.encode(text, add_special_tokens=False).ids) if text else 0


_piece_counts: dict[int, tuple[object, dict[str, int]]] = {}  # per tokenizer: piece -> its token count


def count_each(tokenizer, texts: list[str]) -> list[int]:
    """Tokens in each text (a stream's chunks). Chunks repeat, so each distinct piece is encoded
    once per tokenizer and remembered: a reply costs a lookup per chunk, not an encoding."""
    entry = _piece_counts.get(id(tokenizer))
    if entry is None or entry[0] is not tokenizer:
        if len(_piece_counts) >= 8:
            _piece_counts.clear()
        entry = _piece_counts[id(tokenizer)] = (tokenizer, {})
    counts = entry[1]
    missing = {t for t in texts if t not in counts}
    if missing:
        if len(counts) > 100_000:
            counts.clear()
            missing = set(texts)
        counts.update((t, count_tokens(tokenizer, t)) for t in missing)
    return [counts[t] for t in texts]


def text_of_tokens(tokenizer, n_tokens: int, rng: random.Random) -> str:
    """Random words trimmed to exactly n_tokens under the tokenizer (decode of the first n ids)."""
    words = []
    approx = 0
    while approx < n_tokens + 8:
        words.append(rng.choice(_WORDS))
        approx += 1
    ids = tokenizer.encode(" ".join(words), add_special_tokens=False).ids
    while len(ids) < n_tokens:
        words.extend(rng.choice(_WORDS) for _ in range(n_tokens))
        ids = tokenizer.encode(" ".join(words), add_special_tokens=False).ids
    return tokenizer.decode(ids[:n_tokens])


def block_text(tokenizer, block_id: int, n_tokens: int) -> str:
    """One block of a block-hashed trace as text: the same id and length give the same words, so
    prompts that share leading blocks share a prefix, token for token."""
    return text_of_tokens(tokenizer, n_tokens, random.Random(f"trace-block:{block_id}"))


def blocks_text(tokenizer, block_ids: tuple[int, ...], block_tokens: int, n_prompt: int, overhead: int) -> str:
    """A prompt of n_prompt tokens made of its blocks, the instruction's tokens taken from the last;
    where the last is too short (small blocks: an agent trace's 64, or a scaled trace's), from the
    blocks before it too. A shortened block is the first tokens of its full text, so a later prompt
    that re-sends it whole still shares its prefix up to there."""
    sizes = [min(block_tokens, n_prompt - i * block_tokens) for i in range(len(block_ids))]
    if sum(sizes) <= overhead:
        raise ValueError(f"a trace prompt of {n_prompt} tokens is too small for the {overhead}-token instruction the "
                         "synthetic workload adds")
    take, k = overhead, len(sizes) - 1
    while take:
        cut = min(take, sizes[k] - (1 if k == len(sizes) - 1 else 0))
        sizes[k] -= cut
        take -= cut
        k -= 1
    return " ".join(block_text(tokenizer, h, n) for h, n in zip(block_ids, sizes) if n > 0)


def synthetic_prompts(workload, tokenizer, count: int, seed: int, lengths: list[tuple[int, int]] | None = None,
                      blocks: tuple[int, list[tuple[int, ...]]] | None = None) -> list[PromptSpec]:
    """`count` distinct prompts (conversations, when the workload has turns) built from a seed.

    Lengths come from `lengths` (a trace) or are drawn from the workload's distributions. Each
    prompt's own text is random words, so prompts share nothing beyond the chat template and, when
    asked for, their group's prefix: prefix caching helps exactly where the workload says it should.
    A block-hashed trace gives `blocks` (block tokens, each prompt's block ids): each prompt is then
    its blocks' text, so the prefix reuse the trace implies is what the engine is sent.
    """
    rng = random.Random(f"{workload.version}:{seed}")
    as_json = workload.response_format == "json_schema"
    instruction = ('Reply with a JSON object: "words" holds the first five words above, "count" how many.'
                   if as_json else "Continue this list of words with more words:")
    overhead = count_tokens(tokenizer, instruction) + 1
    turns = workload.turns()
    if lengths is None:
        n = count * turns
        lengths = list(zip(workload.prompt_tokens.sample(n, seed=hash_seed(workload.version, seed, "prompt")),
                           workload.output_tokens.sample(n, seed=hash_seed(workload.version, seed, "output"))))
    else:
        lengths = [lengths[i] for i in range(count) for _ in range(turns)]
    prefix_spec = workload.shared_prefix
    prefixes = shared_prefix_texts(workload, tokenizer)

    def user_content(n_prompt: int, group: int | None, block_ids: tuple[int, ...] = ()) -> str:
        if block_ids:
            return f"{blocks_text(tokenizer, block_ids, blocks[0], n_prompt, overhead)}\n{instruction}"
        own = n_prompt - overhead - (prefix_spec.tokens + 1 if group is not None else 0)
        if own <= 0:
            raise ValueError(f"a prompt of {n_prompt} tokens is too small for the synthetic workload; use at least "
                             f"{overhead + 16 + (prefix_spec.tokens if prefix_spec else 0)}")
        body = text_of_tokens(tokenizer, own, rng)
        return (f"{prefixes[group]}\n" if group is not None else "") + f"{body}\n{instruction}"

    prompts = []
    for i in range(count):
        group = draw_group(rng, prefix_spec.groups, prefix_spec.zipf_exponent) if prefix_spec else None
        n_prompt, n_out = lengths[i * turns]
        content = user_content(n_prompt, group, blocks[1][i] if blocks else ())
        messages = ([{"role": "system", "content": workload.system_prompt}] if workload.system_prompt else [])
        messages.append({"role": "user", "content": content})
        follow = []
        for t in range(1, turns):
            p_t, o_t = lengths[i * turns + t]
            c_t = user_content(p_t, None)
            follow.append((c_t, count_tokens(tokenizer, c_t), o_t))
        prompts.append(PromptSpec(i, messages, count_tokens(tokenizer, content), n_out, group, tuple(follow),
                                  ANSWER_SCHEMA if as_json else None))
    return prompts


def zipf_weights(groups: int, exponent: float) -> list[float]:
    """Each group's share of the prompts under Zipf popularity: 1/g^s over g = 1..groups, normalized."""
    raw = [1 / g ** exponent for g in range(1, groups + 1)]
    return [w / sum(raw) for w in raw]


def draw_group(rng: random.Random, groups: int, exponent: float) -> int:
    """A prompt's group: uniform without skew (the draw every earlier run made), else by Zipf weight."""
    if not exponent:
        return rng.randrange(groups)
    return rng.choices(range(groups), weights=zipf_weights(groups, exponent))[0]


def recorded_prompts(messages: list[list[dict]], output_tokens: list[int], tokenizer) -> list[PromptSpec]:
    """A request log's prompts as it recorded them, in its order: each its own chat messages (the
    session so far included), counted by the client's tokenizer, its reply forced to its recorded
    length."""
    out = []
    for i, (m, n_out) in enumerate(zip(messages, output_tokens)):
        text = "\n".join(c.get("content") if isinstance(c.get("content"), str) else json.dumps(c.get("content"))
                         for c in m)
        out.append(PromptSpec(i, [dict(c) for c in m], count_tokens(tokenizer, text), n_out))
    return out


def hash_seed(*parts) -> int:
    """A stable integer seed from several parts (Python's hash() changes between processes)."""
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:8], "little")


def shared_prefix_texts(workload, tokenizer) -> list[str]:
    """The group prefixes alone, as user messages would open: what priming a warm cache sends."""
    spec = workload.shared_prefix
    if not spec:
        return []
    return [text_of_tokens(tokenizer, spec.tokens, random.Random(f"{workload.version}:prefix:{g}"))
            for g in range(spec.groups)]
