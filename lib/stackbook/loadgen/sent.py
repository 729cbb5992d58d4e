"""What was sent: every request body, appended (gzip-compressed) as it goes out, with its send
offset, so a run can be audited and replayed exactly; and the per-point digests of it.

Headers are never kept (an API key travels there), only the JSON body.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import zlib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from stackbook.config.protocol import Decoding
from stackbook.loadgen.records import BackgroundWriter, latest_attempt_only
from stackbook.loadgen.phases import Phase
from stackbook.loadgen.prompt_salt import unsalted

# Fields of a body that carry the engine's own dialect (its name for the model, how it forces a
# length, how it streams), not the prompt: left out of the prompt digest so that two engines
# sent the same prompts compare equal. The requested length, max_tokens, every engine takes
# alike: it stays in.
NOT_PROMPT = ("model", "stream", "stream_options", "min_tokens", "ignore_eos", "logit_bias", "cache_prompt",
              "generation_config")
# A dialect that carries the sampling knobs inside one JSON field (transformers serve's
# generation_config): its knobs count as sent, as if they were top-level fields.
NESTED_SAMPLING = ("generation_config",)


# The sampling knobs a body may carry, under the protocol's names, and the other names engines'
# dialects give them (llama-server's repeat_penalty).
SAMPLING = tuple(k for k in Decoding.model_fields if k != "preset") + ("presence_penalty", "frequency_penalty")
SAMPLING_ALIASES = {"repeat_penalty": "repetition_penalty"}


# Values that change nothing (no penalty), and the knobs greedy decoding never consults (it draws
# no random number and takes the most likely token whatever the truncation).
NEUTRAL = {"repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0}
UNUSED_WHEN_GREEDY = ("seed", "top_p", "top_k", "min_p")


def decoding_sent(body: dict) -> dict:
    """The sampling fields a body carried that shape its output, under the protocol's names: a
    neutral value, or at temperature 0 a knob greedy decoding never reads, is left out, so an
    endpoint that cannot send it (a hosted API's top_k, mlx's seed) decodes the same way."""
    fields = dict(body)
    for key in NESTED_SAMPLING:
        nested = body.get(key)
        if isinstance(nested, str):
            try:
                nested = json.loads(nested)
            except ValueError:
                nested = None
        if isinstance(nested, dict):
            fields = {**nested, **body}  # a top-level field wins over the same knob nested
    out = {SAMPLING_ALIASES.get(k, k): v for k, v in fields.items() if SAMPLING_ALIASES.get(k, k) in SAMPLING}
    out = {k: v for k, v in out.items() if not (k in NEUTRAL and v == NEUTRAL[k])}
    if out.get("temperature") == 0:
        out = {k: v for k, v in out.items() if k not in UNUSED_WHEN_GREEDY}
    return out


class SentRequest(BaseModel):
    """One request as it left the client."""
    model_config = ConfigDict(extra="allow")
    point: str
    attempt: int = 0
    phase: Phase
    request_index: int
    turn: int = 0
    scheduled_s: float = Field(description="the schedule's offset from the point's start")
    sent_s: float = Field(description="when it was sent, offset from the point's start: the replay schedule")
    body: dict[str, Any]


class SentWriter(BackgroundWriter):
    """Append-only, gzip-compressed JSONL of request bodies, written by a background thread (a
    slow disk never delays a send); each batch is sync-flushed, so what was sent before a crash
    can be read back."""
    thread_name = "sent-writer"

    def _open(self):
        _repair(self.path)
        return gzip.open(self.path, "ab")

    def write(self, sent: dict) -> None:
        """Queue one sent request (the fields of SentRequest); serialised off the sending path."""
        self._put(sent)

    def _write_batch(self, items: list) -> None:
        self._f.write("".join(json.dumps(x, separators=(",", ":")) + "\n" for x in items).encode())
        self._f.flush(zlib.Z_SYNC_FLUSH)


def _repair(path: Path) -> None:
    """A file cut by a crash (no gzip trailer) is rewritten with what can be read, so that the
    bodies a resumed run appends after it stay readable."""
    if not path.exists() or path.stat().st_size == 0:
        return
    try:
        with gzip.open(path, "rb") as f:
            while f.read(1 << 20):
                pass
        return
    except (EOFError, gzip.BadGzipFile, zlib.error):
        pass
    kept = read_sent(path)
    tmp = path.with_name(path.name + ".tmp")
    with gzip.open(tmp, "wb") as f:
        f.write("".join(x.model_dump_json() + "\n" for x in kept).encode())
    os.replace(tmp, path)


def read_sent(path: str | os.PathLike, latest_attempt: bool = False) -> list[SentRequest]:
    """Read the sent bodies; a tail cut by a crash is dropped, every complete line kept. With
    latest_attempt, only each point's latest attempt (as for the request records)."""
    p = Path(path)
    out: list[SentRequest] = []
    if not p.exists():
        return out
    try:
        with gzip.open(p, "rt", encoding="utf-8") as f:
            for line in f:
                if line.endswith("\n"):
                    out.append(SentRequest.model_validate_json(line))
    except (EOFError, gzip.BadGzipFile, zlib.error):
        pass  # the end of a stream cut by a crash
    return latest_attempt_only(out) if latest_attempt else out


def prompt_of(body: dict) -> dict:
    """What the workload fixed in a body: the messages without the model's own replies (a later
    turn carries them, and they differ between engines by nature) and any reply format; the
    engine's dialect fields, the sampling fields and a cache salt are left out."""
    messages = [m for m in unsalted(body.get("messages", [])) if m.get("role") != "assistant"]
    rest = {k: v for k, v in body.items()
            if k not in NOT_PROMPT and SAMPLING_ALIASES.get(k, k) not in SAMPLING and k != "messages"}
    return {"messages": messages, **rest}


def _digest(items) -> str:
    h = hashlib.sha256()
    for x in items:
        h.update(json.dumps(x, sort_keys=True, separators=(",", ":")).encode())
        h.update(b"\n")
    return h.hexdigest()


def point_digests(sent: list[SentRequest]) -> dict[str, dict]:
    """Per point: how many requests were sent, the sha256 of their exact bodies (audit, replay) and
    of their prompts alone (fairness: equal across engines that were sent the same prompts). The
    order is the request order, not the send order, which depends on the engine's speed."""
    by_point: dict[str, list[SentRequest]] = {}
    for s in sent:
        by_point.setdefault(s.point, []).append(s)
    out = {}
    for point, items in by_point.items():
        items = sorted(items, key=lambda s: (s.request_index, s.turn))
        decodings = {json.dumps(decoding_sent(s.body), sort_keys=True) for s in items}
        phases: dict[str, int] = {}
        for x in items:
            phases[x.phase.value] = phases.get(x.phase.value, 0) + 1
        out[point] = {"requests_sent": len(items), "phases_sent": phases,
                      "decoding_sent": [json.loads(d) for d in sorted(decodings)],
                      "bodies_sha256": _digest(s.body for s in items),
                      "prompts_sha256": _digest(prompt_of(s.body) for s in items)}
    return out
