"""A salt at the start of every prompt, unique to one arm's point: the way to a cold cache where
the server's cannot be flushed (a hosted API's prompt cache, an endpoint several arms share).

Under `protocol.cache_salt`, each point's prompts open with `[salt <8 hex>] `, drawn from the
run, the arm, the point and its attempt, so no request can be served from what another arm, round
or run sent, while the requests of one point still share what the workload makes them share. The
salt is the same length in characters for every arm; the prompt digests the fairness check
compares leave it out, so arms salted apart still read "same prompts". Sentinels (the canary
checks mixed into the load) are sent as they are: their answers are judged word for word.
"""
from __future__ import annotations

import dataclasses
import hashlib
import re

from stackbook.loadgen.workload import count_tokens

SALT = re.compile(r"^\[salt [0-9a-f]{8}\] ")


def salt_for(run_id: str, arm: str, point: str, attempt: int) -> str:
    digest = hashlib.sha256(f"{run_id}:{arm}:{point}:{attempt}".encode()).hexdigest()[:8]
    return f"[salt {digest}] "


def salted(prompts: list, salt: str, tokenizer) -> list:
    """The prompts with the salt opening their first message (sentinels unchanged); where that
    message is the user's, its token count is taken again, salt included."""
    out = []
    for p in prompts:
        if p.sentinel is not None or not p.messages:
            out.append(p)
            continue
        first, *rest = p.messages
        content = salt + first["content"]
        counted = count_tokens(tokenizer, content) if first.get("role") == "user" else p.prompt_tokens_client
        out.append(dataclasses.replace(p, messages=[{**first, "content": content}, *rest],
                                       prompt_tokens_client=counted))
    return out


def unsalted(messages: list) -> list:
    """The messages as the workload wrote them: a salt opening the first one removed."""
    if not messages or not isinstance(messages[0].get("content"), str) or not SALT.match(messages[0]["content"]):
        return messages
    return [{**messages[0], "content": SALT.sub("", messages[0]["content"], count=1)}, *messages[1:]]


def salt_point(protocol, run_id: str, arm: str, point: str, attempt: int, prompts: list, tokenizer
               ) -> tuple[list, str | None]:
    """A point's prompts as the protocol sends them, and their salt (None: not salted)."""
    if not protocol.cache_salt:
        return prompts, None
    salt = salt_for(run_id, arm, point, attempt)
    return salted(prompts, salt, tokenizer), salt.strip()
