"""A private request log's bodies as they are kept: each message's content replaced by its digest
and length, so the outputs can show that two arms were sent the same prompts, and how long they
were, without holding the text a log may carry about people."""
from __future__ import annotations

import hashlib
import json

DIGEST_FIELD = "content_sha256"


def content_digest(content) -> str:
    """The sha256 of a message's content as sent (a string, or a list of parts as JSON)."""
    text = content if isinstance(content, str) else json.dumps(content, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def redacted(body: dict) -> dict:
    """The body with every message's content replaced by its digest and its length in characters."""
    messages = [{k: v for k, v in m.items() if k != "content"} | {
                    DIGEST_FIELD: content_digest(m.get("content") or ""),
                    "content_chars": len(m["content"] if isinstance(m.get("content"), str)
                                         else json.dumps(m.get("content") or ""))}
                for m in body.get("messages", [])]
    return {**body, "messages": messages}


def is_redacted(body: dict) -> bool:
    return any(DIGEST_FIELD in m and "content" not in m for m in body.get("messages", []))
