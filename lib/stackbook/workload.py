"""Prompts of a stated token length, built deterministically from a seed."""
from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

_WORDS = ("river mountain signal harbor lantern orchard meadow copper violet engine quiet morning "
          "window garden thunder silver station pocket marble ribbon canyon feather circuit harvest "
          "compass velvet glacier beacon tunnel prairie falcon cedar lattice ember pillar saddle "
          "anchor quartz willow timber mosaic canvas valley breeze puzzle summit orbit meadowlark").split()


@dataclass(frozen=True)
class PromptSpec:
    index: int
    messages: list
    prompt_tokens_client: int
    output_tokens: int | None = None   # None: the protocol's fixed output length


_WORDS_AND_PUNCTUATION = re.compile(r"\w+|[^\w\s]")


class ApproximateTokenizer:
    """Counts words and punctuation: for endpoints whose tokenizer is not available locally, and
    for the calibration server (one word per streamed token). Client token counts are then
    approximate; the server's usage counts remain exact."""
    approximate = True

    def encode(self, text, add_special_tokens=False):
        class Encoding:
            ids = _WORDS_AND_PUNCTUATION.findall(text)
        return Encoding()

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


def synthetic_prompts(workload, tokenizer, count: int, seed: int,
                      lengths: list[tuple[int, int]] | None = None) -> list[PromptSpec]:
    """`count` distinct prompts of workload.prompt_tokens tokens each (user content only).

    Each prompt starts with its own random words, so no two share a prefix beyond the chat
    template: prefix caching cannot turn this into a cache benchmark by accident.
    """
    rng = random.Random(f"{workload.version}:{seed}")
    instruction = "Continue this list of words with more words:"
    overhead = count_tokens(tokenizer, instruction) + 1
    prompts = []
    for i in range(count):
        n_prompt, n_out = lengths[i] if lengths else (workload.prompt_tokens, None)
        budget = n_prompt - overhead
        if budget <= 0:
            raise ValueError(f"a prompt of {n_prompt} tokens is too small for the synthetic workload; use at least 16")
        body = text_of_tokens(tokenizer, budget, rng)
        content = f"{body}\n{instruction}"
        messages = ([{"role": "system", "content": workload.system_prompt}] if workload.system_prompt else [])
        messages.append({"role": "user", "content": content})
        prompts.append(PromptSpec(i, messages, count_tokens(tokenizer, content), n_out))
    return prompts
