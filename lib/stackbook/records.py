"""Raw per-request records: appended and flushed to requests.jsonl as each request completes."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

ErrorClass = Literal["none", "admission_rejected", "timeout", "transport", "http_error",
                     "malformed_stream", "length_truncated", "engine_died"]


class RequestRecord(BaseModel):
    """One request, with every timestamp the metrics are computed from (seconds)."""
    run_id: str
    arm: str
    point: str
    phase: Literal["warmup", "measure", "cooldown"]
    repetition: int = 0
    attempt: int = 0
    concurrency: int
    request_index: int
    scheduled_s: float = Field(description="when the schedule said to send, relative to point start")
    sent_s: float
    first_token_s: float | None = None
    end_s: float
    sent_unix: float
    chunk_times_s: list[float] = Field(default_factory=list)
    chunk_tokens: list[int] = Field(default_factory=list)
    prompt_tokens_client: int
    prompt_tokens_server: int | None = None
    output_tokens_server: int | None = None
    output_tokens_client: int = 0
    cached_prompt_tokens: int | None = None
    output_tokens_requested: int
    finish_reason: str | None = None
    status: int | None = None
    error_class: ErrorClass = "none"
    error: str | None = None
    output_text: str = ""

    @property
    def ok(self) -> bool:
        return self.error_class == "none"


class RecordWriter:
    """Append-only JSONL writer: one line per completed request, flushed and fsynced."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "a", encoding="utf-8")

    def write(self, record: RequestRecord) -> None:
        self._f.write(record.model_dump_json() + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def read_records(path: str | os.PathLike, latest_attempt: bool = False) -> list[RequestRecord]:
    """Read requests.jsonl; a last line cut by a crash is skipped, every complete line kept.
    With latest_attempt, only each point's latest attempt (a resumed run re-runs cut points)."""
    out = []
    p = Path(path)
    if not p.exists():
        return out
    for line in p.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            out.append(RequestRecord.model_validate_json(line))
        except ValueError:
            continue
    if latest_attempt:
        last: dict[str, int] = {}
        for r in out:
            last[r.point] = max(last.get(r.point, 0), r.attempt)
        out = [r for r in out if r.attempt == last[r.point]]
    return out
