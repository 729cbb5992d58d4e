"""Raw per-request records: appended and flushed to requests.jsonl as each request completes."""
from __future__ import annotations

import os
import queue
import sys
import threading
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from stackbook.evidence.files import while_unchanged
from stackbook.loadgen.phases import Phase
ErrorClass = Literal["none", "admission_rejected", "timeout", "transport", "http_error",
                     "malformed_stream", "length_truncated", "schema_failure", "engine_died"]
NOT_ANSWERED = ("timeout", "transport", "engine_died")  # how a gone or frozen engine fails a request


class RequestRecord(BaseModel):
    """One request, with every timestamp the metrics are computed from (seconds)."""
    run_id: str
    arm: str
    point: str
    phase: Phase
    repetition: int = 0
    attempt: int = 0
    concurrency: int
    request_index: int
    conversation: int | None = Field(None, description="multi-turn workloads: the conversation this turn belongs to")
    turn: int = 0
    sentinel: str | None = Field(None, description="the canary check a sentinel request carries")
    prefix_group: int | None = None
    scheduled_s: float = Field(description="when the schedule said to send, relative to point start")
    sent_s: float
    first_token_s: float | None = None
    first_event_s: float | None = Field(None, description="first SSE event with a choice, even an empty one")
    end_s: float
    sent_unix: float
    connect_s: float | None = Field(None, description="opening a new connection (TCP and TLS) before this request "
                                    "went out, inside sent_s..first_token_s; None on a kept-alive connection")
    chunk_times_s: list[float] = Field(default_factory=list)
    chunk_tokens: list[int] = Field(default_factory=list)
    prompt_tokens_client: int
    prompt_tokens_server: int | None = None
    output_tokens_server: int | None = None
    output_tokens_client: int = 0
    cached_prompt_tokens: int | None = None
    output_tokens_requested: int
    length_controlled: bool = Field(True, description="False where the output may end early by design (JSON)")
    finish_reason: str | None = None
    status: int | None = None
    error_class: ErrorClass = "none"
    error: str | None = None
    output_text: str = ""
    engine_timings: dict | None = Field(None, description="the engine's own timings of this request where its "
                                        "stream carries them (a final-chunk `timings`: prompt_n, prompt_ms, "
                                        "predicted_n, predicted_ms, ...)")

    @property
    def ok(self) -> bool:
        return self.error_class == "none"


class RecordsNotWritten(OSError):
    """A run's record file could not be written (a full disk, a read-only mount): the sweep stops
    at once rather than send requests whose records would be lost."""

    def __init__(self, path: Path, err: OSError):
        super().__init__(err.errno, f"{path}: records could not be written ({err.strerror or err}); the "
                                    "records before this one are kept: free space (or make the directory "
                                    "writable) and continue with stackbook run --resume")


def repair_torn_tail(path: Path) -> int:
    """Cut a last line left without its newline by a crash or a full disk, so that what a resumed
    run appends starts on a line of its own; returns the bytes removed (0: the file ends whole)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return 0
    if size == 0:
        return 0
    with open(path, "rb+") as f:
        end = size
        while end > 0:
            start = max(0, end - (1 << 16))
            f.seek(start)
            chunk = f.read(end - start)
            if end == size and chunk.endswith(b"\n"):
                return 0
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                keep = start + cut + 1
                break
            end = start
        else:
            keep = 0
        f.truncate(keep)
        os.fsync(f.fileno())
    return size - keep


class BackgroundWriter:
    """Append-only file written by a background thread: queued items are written in batches,
    flushed and made durable within a twentieth of a second, so a slow disk never stalls the
    event loop that times the requests. `close` writes whatever is still queued. Subclasses say
    how to open the file and how to write one batch."""
    thread_name = "background-writer"
    batch_s = 0.05  # an item is on disk within this long (plus the write itself)

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.error: OSError | None = None  # a write that failed (a full disk): raised to whoever writes next
        self._f = self._open()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._drain, name=self.thread_name, daemon=True)
        self._thread.start()

    def _open(self):
        raise NotImplementedError

    def _write_batch(self, items: list) -> None:
        raise NotImplementedError

    def _drain(self) -> None:
        try:
            self._drain_batches()
        except OSError as err:
            self.error = err

    def _put(self, item) -> None:
        if self.error is not None:
            raise RecordsNotWritten(self.path, self.error)
        self._queue.put(item)

    def _drain_batches(self) -> None:
        while True:
            items = [self._queue.get()]
            if items[0] is not None:
                # Gather what else arrives for a moment: one write, flush and sync per batch, not
                # one per request (at hundreds of requests a second, waking per item cost more CPU
                # than the writing, and each wake-up takes the interpreter lock from the loop).
                time.sleep(self.batch_s)
            while not self._queue.empty():
                items.append(self._queue.get_nowait())
            done = items[-1] is None
            self._write_batch([x for x in items if x is not None])
            if done:
                return

    def close(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        try:
            self._f.close()
        except OSError as err:
            self.error = self.error or err
        if self.error is not None:
            raise RecordsNotWritten(self.path, self.error)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class RecordWriter(BackgroundWriter):
    """requests.jsonl: one line per completed request, written, flushed and fsynced."""
    thread_name = "record-writer"

    def _open(self):
        torn = repair_torn_tail(self.path)
        if torn:
            print(f"{self.path.name}: removed a torn last line ({torn} bytes, cut by a crash) before appending",
                  file=sys.stderr)
        return open(self.path, "a", encoding="utf-8")

    def write(self, record: RequestRecord) -> None:
        self._put(record.model_dump_json() + "\n")

    def _write_batch(self, lines: list) -> None:
        self._f.write("".join(lines))
        self._f.flush()
        os.fsync(self._f.fileno())


def _parse_records(path: Path) -> list[RequestRecord]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            out.append(RequestRecord.model_validate_json(line))
        except ValueError:
            continue
    return out


_parsed: dict = {}


def read_records(path: str | os.PathLike, latest_attempt: bool = False) -> list[RequestRecord]:
    """Read requests.jsonl; a last line cut by a crash is skipped, every complete line kept.
    With latest_attempt, only each point's latest attempt (a resumed run re-runs cut points).
    A file read before and unchanged since is not parsed again: a notebook reads its arm's
    records several times, and 200,000 of them take seconds."""
    p = Path(path)
    if not p.exists():
        return []
    out = list(while_unchanged(_parsed, p, _parse_records, keep=2))
    return latest_attempt_only(out) if latest_attempt else out


def latest_attempt_only(items: list) -> list:
    """The items (request records, sent requests) of each point's latest attempt, in their order:
    a resumed run re-runs a cut point as a new attempt, and only that one enters the metrics."""
    last: dict[str, int] = {}
    for x in items:
        last[x.point] = max(last.get(x.point, 0), x.attempt)
    return [x for x in items if x.attempt == last[x.point]]
