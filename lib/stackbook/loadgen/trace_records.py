"""What every trace format is read into: a request's arrival, its lengths, where recorded its
prompt's block hashes, and where the log holds it its content and its session; the trace they
make; and what a format states about itself."""
from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict


@dataclass(frozen=True)
class TraceRequest:
    timestamp_s: float
    prompt_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()
    # A request log's own content: the chat messages as recorded (None: the format has lengths only).
    messages: tuple[dict, ...] | None = None
    session: str | None = None  # the conversation or agent session it belongs to, where recorded
    turn: int = 0  # its place in that session, from 0
    # An agent trace's structure (loadgen.trace_weka): the root session a subagent's session belongs
    # to (fitting keeps or drops a root with all its subagents), how deep it is (0: the root), the
    # (session, turn) whose reply starts it (its first step only), the sessions whose last reply
    # this step waits for, the recorded server time of this step, and the recorded idle time
    # (tool time) between what it waits on ending and it leaving (None: not recorded).
    family: str | None = None
    depth: int = 0
    spawned_by: tuple[str, int] | None = None
    waits_for: tuple[str, ...] = ()
    api_time_s: float | None = None
    gap_s: float | None = None


@dataclass(frozen=True)
class Trace:
    """A trace read: its requests in arrival order (timestamps from the first), the block size its
    hash ids stand for (None: the format has none), and what the reader left out and why."""
    format: str
    requests: list[TraceRequest]
    block_tokens: int | None = None
    left_out: dict[str, int] = field(default_factory=dict)

    @property
    def has_content(self) -> bool:
        return any(r.messages for r in self.requests)


class TraceRow(BaseModel):
    """One row of a trace file, validated by its format's schema."""
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    def requests(self) -> list[TraceRequest]:
        """The requests this row records (a conversation's row records one per turn)."""
        one = self.request()
        return [] if one is None else [one]

    def request(self) -> TraceRequest | None:
        raise NotImplementedError


@dataclass(frozen=True)
class TraceFormat:
    name: str
    row: type[TraceRow]
    csv: bool | None  # True: CSV, False: JSON lines, None: by the file's suffix
    block_tokens: int | None = None
    timed: bool = True  # False: the format records no arrival times (a replay gives a rate)
    json_array: bool = False  # the file may also be one JSON array of rows (ShareGPT's own files)
    # A format whose file is not one row a request (an agent trace: one object a session tree)
    # reads it whole: reader(path, **options) -> Trace.
    reader: object = None
