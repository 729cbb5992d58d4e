"""Request logs that hold content, read as traces: the prompts people actually sent, kept as their
chat messages, with the session each belongs to.

  openai    JSON lines of logged chat-completion requests: timestamp (seconds, or an ISO 8601 time),
            body (the request: messages, max_tokens or max_completion_tokens), optionally response
            (its usage gives the reply's length) and session (or session_id, conversation_id)
  sharegpt  ShareGPT conversations (a JSON array, or JSON lines): id, conversations [{from, value}];
            each human turn is a request that carries the conversation so far and is answered by
            the recorded gpt turn's length. The format records no times: a replay gives a rate.

A prompt's length is its text counted in approximate tokens (words and punctuation,
loadgen.workload.ApproximateTokenizer), cut into CONTENT_BLOCK_TOKENS-token blocks of that count
and hashed, so the prefix reuse a log implies is computed as for a block-hashed trace; the
engine's tokenizer counts what is sent. A reply's length is the log's own usage count where it
has one, else the request's bound (openai) or the recorded reply counted the same way (sharegpt).
"""
from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

from stackbook.loadgen.trace_records import TraceRequest, TraceRow
from stackbook.loadgen.workload import ApproximateTokenizer

CONTENT_BLOCK_TOKENS = 64
_COUNTER = ApproximateTokenizer()


def message_text(message: dict) -> str:
    """A message's text: its content string, or the text parts of a content list."""
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def content_tokens(messages) -> list[str]:
    """The messages as one stream of approximate tokens, each prefixed by its role, in order."""
    out: list[str] = []
    for m in messages:
        out.append(f"<{m.get('role', '')}>")
        out.extend(_COUNTER.encode(message_text(m)).ids)
    return out


def block_hashes(tokens: list[str], size: int = CONTENT_BLOCK_TOKENS) -> tuple[int, ...]:
    """A hash per block of `size` tokens, each covering the blocks before it (a prefix cache reuses
    a block only after the same prefix): equal prefixes, equal ids."""
    out, h = [], hashlib.sha256()
    for i in range(0, len(tokens), size):
        h.update("\x1f".join(tokens[i:i + size]).encode())
        out.append(int.from_bytes(h.copy().digest()[:8], "big"))
    return tuple(out)


def content_request(timestamp_s: float, messages: list[dict], output_tokens: int, session: str | None,
                    turn: int) -> TraceRequest:
    tokens = content_tokens(messages)
    return TraceRequest(timestamp_s, len(tokens), output_tokens, block_hashes(tokens), tuple(messages), session, turn)


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list | None = None


class ChatBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    messages: list[Message] = Field(min_length=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)


class Usage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    prompt_tokens: int | None = Field(None, ge=0)
    completion_tokens: int | None = Field(None, ge=0)


class LoggedResponse(BaseModel):
    model_config = ConfigDict(extra="ignore")
    usage: Usage | None = None


class OpenAIRequestRow(TraceRow):
    timestamp: float | datetime
    body: ChatBody
    response: LoggedResponse | None = None
    session: str | None = Field(None, validation_alias=AliasChoices("session", "session_id", "conversation_id"))

    @field_validator("session", mode="before")
    @classmethod
    def _as_text(cls, v):
        return None if v is None else str(v)

    @model_validator(mode="after")
    def _reply_length_known(self) -> "OpenAIRequestRow":
        if self.output_tokens() is None:
            raise ValueError("no reply length: give body.max_tokens (or max_completion_tokens), or the response "
                             "with its usage.completion_tokens")
        return self

    def output_tokens(self) -> int | None:
        usage = self.response.usage if self.response else None
        if usage and usage.completion_tokens:
            return usage.completion_tokens
        return self.body.max_completion_tokens or self.body.max_tokens

    def request(self) -> TraceRequest:
        stamp = self.timestamp
        if isinstance(stamp, datetime):
            stamp = (stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)).timestamp()
        messages = [m.model_dump(exclude_none=True) for m in self.body.messages]
        return content_request(float(stamp), messages, self.output_tokens(), self.session, 0)


class ShareGPTTurn(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    speaker: Literal["human", "gpt", "system", "user", "assistant", "chatgpt", "bing", "bard"] = Field(alias="from")
    value: str


ROLE_OF = {"human": "user", "user": "user", "system": "system"}  # every other speaker is the assistant


class ShareGPTRow(TraceRow):
    id: str | int | None = None
    conversations: list[ShareGPTTurn] = Field(min_length=1)

    def requests(self) -> list[TraceRequest]:
        """One request per human turn answered by a recorded reply, carrying the conversation so
        far; its reply length is that reply's, counted in approximate tokens. The timestamps are
        the requests' order within the file, set by the reader."""
        history: list[dict] = []
        out, turn = [], 0
        session = None if self.id is None else str(self.id)
        turns = self.conversations
        for i, t in enumerate(turns):
            role = ROLE_OF.get(t.speaker, "assistant")
            history.append({"role": role, "content": t.value})
            if role == "user" and i + 1 < len(turns) and ROLE_OF.get(turns[i + 1].speaker) is None:
                reply = max(1, len(_COUNTER.encode(turns[i + 1].value).ids))
                out.append(content_request(0.0, list(history), reply, session, turn))
                turn += 1
        return out


def split_sharegpt(text: str) -> list[dict] | None:
    """ShareGPT's own files are one JSON array of conversations: its rows, or None for JSON lines."""
    stripped = text.lstrip()
    if not stripped.startswith("["):
        return None
    rows = json.loads(stripped)
    if not isinstance(rows, list):
        raise ValueError("a ShareGPT file is a JSON array of conversations, or one conversation a line")
    return rows
