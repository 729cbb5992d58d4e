"""Request traces in the formats people have, read into one shape: when each request arrived, its
prompt and reply lengths, and where the trace records them, the hash of each fixed-size block of
its prompt (identical blocks, identical ids: the prefix reuse the trace implies).

Each format is a named reader with a row schema; a row that does not fit is refused with its line
and field. Formats:
  stackbook  JSONL or CSV: timestamp_s, prompt_tokens, output_tokens
  azure      Azure LLM inference trace CSV: TIMESTAMP (date and time), ContextTokens, GeneratedTokens
  burstgpt   BurstGPT CSV: Timestamp (s), Request tokens, Response tokens (rows with no response,
             failed in the trace, are left out and counted)
  mooncake   Mooncake JSONL: timestamp (ms), input_length, output_length, hash_ids (512-token blocks
             unless the campaign states another size), optionally session_id
  weka       agent traces as recorded (WEKA kv-cache-tester, AgentX): one object a session, with its
             subagents (loadgen.trace_weka)
  openai     logged chat-completion requests with their content (loadgen.trace_logs)
  sharegpt   ShareGPT conversations, one request per answered human turn, untimed (loadgen.trace_logs)
"""
from __future__ import annotations

import csv
import dataclasses
import json
import math
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

from pydantic import Field, ValidationError, field_validator

from stackbook.evidence.files import while_unchanged
from stackbook.loadgen.trace_logs import CONTENT_BLOCK_TOKENS, OpenAIRequestRow, ShareGPTRow, split_sharegpt
from stackbook.loadgen.trace_records import Trace, TraceFormat, TraceRequest, TraceRow
from stackbook.loadgen.trace_reuse import implied_reuse  # noqa: F401  (where callers have found it)
from stackbook.loadgen.trace_weka import WEKA_BLOCK_TOKENS, read_weka

MOONCAKE_BLOCK_TOKENS = 512


class StackbookRow(TraceRow):
    timestamp_s: float = Field(ge=0)
    prompt_tokens: int = Field(ge=1)
    output_tokens: int = Field(ge=1)

    def request(self) -> TraceRequest:
        return TraceRequest(self.timestamp_s, self.prompt_tokens, self.output_tokens)


class AzureRow(TraceRow):
    TIMESTAMP: datetime
    ContextTokens: int = Field(ge=1)
    GeneratedTokens: int = Field(ge=1)

    @field_validator("TIMESTAMP", mode="before")
    @classmethod
    def _seven_digit_fraction(cls, v):
        """The trace writes 100 ns digits ("18:15:46.6805900"); Python reads six."""
        if isinstance(v, str) and "." in v:
            head, frac = v.rsplit(".", 1)
            return f"{head}.{frac[:6]}"
        return v

    def request(self) -> TraceRequest:
        stamp = self.TIMESTAMP if self.TIMESTAMP.tzinfo else self.TIMESTAMP.replace(tzinfo=timezone.utc)
        return TraceRequest(stamp.timestamp(), self.ContextTokens, self.GeneratedTokens)


class BurstGPTRow(TraceRow):
    Timestamp: float = Field(ge=0)
    request_tokens: int = Field(alias="Request tokens", ge=0)
    response_tokens: int = Field(alias="Response tokens", ge=0)

    def request(self) -> TraceRequest | None:
        if self.response_tokens == 0 or self.request_tokens == 0:
            return None  # failed in the trace: no reply to reproduce
        return TraceRequest(self.Timestamp, self.request_tokens, self.response_tokens)


class MooncakeRow(TraceRow):
    timestamp: float = Field(ge=0, description="milliseconds")
    input_length: int = Field(ge=1)
    output_length: int = Field(ge=1)
    hash_ids: list[int]
    session_id: str | int | None = None  # multi-turn Mooncake-style lines name their session

    @field_validator("hash_ids")
    @classmethod
    def _one_id_a_block(cls, v: list[int], info):
        n, size = info.data.get("input_length"), (info.context or {}).get("block_tokens") or MOONCAKE_BLOCK_TOKENS
        if n is not None and len(v) != math.ceil(n / size):
            raise ValueError(f"{len(v)} block ids for {n} prompt tokens; {size}-token blocks need "
                             f"{math.ceil(n / size)} (if the trace's blocks are of another size, state it: "
                             "arrival.block_tokens)")
        return v

    def request(self) -> TraceRequest:
        session = None if self.session_id is None else str(self.session_id)
        return TraceRequest(self.timestamp / 1000, self.input_length, self.output_length, tuple(self.hash_ids),
                            session=session)


FORMATS: dict[str, TraceFormat] = {f.name: f for f in (
    TraceFormat("stackbook", StackbookRow, None),
    TraceFormat("azure", AzureRow, True),
    TraceFormat("burstgpt", BurstGPTRow, True),
    TraceFormat("mooncake", MooncakeRow, False, MOONCAKE_BLOCK_TOKENS),
    TraceFormat("openai", OpenAIRequestRow, False, CONTENT_BLOCK_TOKENS),
    TraceFormat("sharegpt", ShareGPTRow, False, CONTENT_BLOCK_TOKENS, timed=False, json_array=True),
    TraceFormat("weka", TraceRow, False, WEKA_BLOCK_TOKENS, reader=read_weka),
)}


def _json_rows(path: Path, array: bool = False) -> Iterator[tuple[int, dict]]:
    """(line number, row) pairs of a JSON-lines file; a line that is not JSON is refused by its number.
    Where the format allows one JSON array of rows, a file that is one is read as such (its rows
    numbered from 1, as "line" in an error)."""
    if array:
        try:
            rows = split_sharegpt(path.read_text())
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: not JSON ({err.msg} at line {err.lineno})") from None
        if rows is not None:
            yield from enumerate(rows, start=1)
            return
    with open(path) as f:
        for i, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                yield i, json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path} line {i}: not JSON ({err.msg}); each line is one request") from None


def _csv_rows(path: Path) -> Iterator[tuple[int, dict]]:
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        for row in reader:
            yield reader.line_num, row


def _refusal(path: Path, line: int, err: ValidationError, fmt: TraceFormat) -> ValueError:
    first = err.errors()[0]
    where = ".".join(str(x) for x in first["loc"]) or "the row"
    fields = ", ".join(f.alias or name for name, f in fmt.row.model_fields.items())
    return ValueError(f"{path} line {line}, field {where}: {first['msg']} (format {fmt.name!r} reads {fields})")


_read: dict = {}


def read_trace_file(path: str | Path, format: str = "stackbook", **options) -> Trace:
    """The trace at `path` in the named format, its requests in arrival order with timestamps
    made relative to the first; read once while the file is unchanged (a replay asks for its
    rows, lengths, schedule and blocks in turn). `options` are what the campaign states of the
    file that the file does not say itself: `block_tokens` (mooncake), `subagent_time` (weka)."""
    if format not in FORMATS:
        raise ValueError(f"trace format {format!r} is not known; known formats: {sorted(FORMATS)}")
    if not Path(path).exists():
        raise FileNotFoundError(f"trace file {path} does not exist")
    options = {k: v for k, v in options.items() if v is not None}
    fmt = FORMATS[format]
    build = (lambda p: fmt.reader(p, **options)) if fmt.reader else (lambda p: _parse(p, format, **options))
    return while_unchanged(_read.setdefault((format, tuple(sorted(options.items()))), {}), path, build)


def _parse(p: Path, format: str, block_tokens: int | None = None) -> Trace:
    path, fmt = p, FORMATS[format]
    as_csv = fmt.csv if fmt.csv is not None else p.suffix == ".csv"
    out: list[TraceRequest] = []
    left_out: dict[str, int] = {}
    for line, raw in (_csv_rows(p) if as_csv else _json_rows(p, fmt.json_array)):
        if not isinstance(raw, dict):
            raise ValueError(f"{path} line {line}: a row is a JSON object (format {fmt.name!r})")
        try:
            reqs = fmt.row.model_validate(raw, context={"block_tokens": block_tokens}).requests()
        except ValidationError as err:
            raise _refusal(p, line, err, fmt) from None
        if not reqs:
            why = "failed in the trace (no reply)" if fmt.timed else "no human turn with a recorded reply"
            left_out[why] = left_out.get(why, 0) + 1
            continue
        out.extend(reqs)
    if not out:
        raise ValueError(f"{path}: the trace holds no request")
    if not fmt.timed:  # untimed: the file's order, one second apart (a replay sets its own rate)
        out = [dataclasses.replace(r, timestamp_s=float(i)) for i, r in enumerate(out)]
    out.sort(key=lambda r: r.timestamp_s)
    t0 = out[0].timestamp_s
    out = [dataclasses.replace(r, timestamp_s=round(r.timestamp_s - t0, 6)) for r in out]
    if fmt.timed:  # a logged session's requests are its turns, in the order they arrived
        seen: dict[str, int] = {}
        for i, r in enumerate(out):
            if r.session is not None:
                out[i] = dataclasses.replace(r, turn=seen.get(r.session, 0))
                seen[r.session] = seen.get(r.session, 0) + 1
    return Trace(format, out, block_tokens or fmt.block_tokens, left_out)
