"""A recorded trace replayed: its timestamps, lengths and, where the format records them, its
prompts' blocks and its sessions' structure (agent sessions and their subagents), fitted to the
campaign's context by a declared rule (whole sessions left out, or every length scaled) or refused."""
from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from stackbook.config.arrival_base import ArrivalLaw, ArrivalPattern, LoadLevel, PointCounts
from stackbook.loadgen.plans import PointPlan, SessionPlan, TracePlan
from stackbook.loadgen.trace_fit import fitted, fitting_scale, scaled, too_long
from stackbook.loadgen.trace_formats import FORMATS, implied_reuse, read_trace_file
from stackbook.locations import resolve_symbolic



class TraceReplay(ArrivalPattern):
    """Replay a recorded trace: timestamps and lengths (and, where the format records them, the
    prompts' block hashes) from a file in one of loadgen.trace_formats' formats."""
    kind: Literal["trace"]
    path: str
    format: Literal[tuple(FORMATS)] = Field("stackbook", description="the trace's format: " + ", ".join(FORMATS))
    speedup: float = Field(1.0, gt=0, description="2 replays twice as fast")
    rate: float | None = Field(None, gt=0, description="requests a second, evenly spaced in the file's order, for a "
                               "format that records no times (sharegpt)")
    keep_content: bool = Field(False, description="a request log's content (prompts and replies) is kept in the "
                               "outputs only when true; otherwise they hold digests and lengths")
    sessions: int | None = Field(None, gt=0, description="replay only the first N sessions (by first arrival), each "
                                 "whole; a request logged without a session is a session of its own")
    fit: Literal["refuse", "drop"] = Field("refuse", description="a session with a request longer than "
                                           "context_length: refuse the campaign (naming it), or drop the whole session")
    order: Literal["timestamp", "session"] = Field(
        "timestamp", description="timestamp: every request at its recorded time, whatever the replies do (open "
        "loop); session: each session a closed loop, a step sent only once the step before it is answered")
    think_s: float | None = Field(None, ge=0, description="with order: session, the seconds between a reply and the "
                                  "session's next step; unset: the next step keeps its recorded time, or leaves at "
                                  "once if the reply ended later")
    block_tokens: int | None = Field(None, gt=0, description="mooncake: the tokens each hash id stands for, where "
                                     "the trace's blocks are not Mooncake's 512")
    subagent_time: Literal["absolute", "relative"] = Field(
        "absolute", description="weka: a subagent's step times are from the session's start (absolute, as AgentX "
        "records them) or from the subagent's spawn (relative, as raw WEKA kv-cache-tester traces do)")
    length_scale: float | None = Field(None, gt=0, le=1, description="every prompt and reply scaled by this factor, "
                                       "block structure kept (blocks of block_tokens x scale tokens), to fit "
                                       "context_length; recorded in the passport")
    plan_type: ClassVar[type] = TracePlan
    _context: int | None = PrivateAttr(None)  # set by the protocol where fit is drop
    _fitted: tuple | None = PrivateAttr(None)

    @property
    def judged_plan(self) -> type:
        """A replay by session is judged as one: its steps wait on replies."""
        return SessionPlan if self.order == "session" else TracePlan

    def point_plan(self, level: LoadLevel, prompts: int, seed: int, cooldown: int) -> PointPlan:
        schedule = self.schedule(level, prompts, seed)
        if self.order == "timestamp":
            return TracePlan(schedule, cooldown)
        steps = self.session_steps() or []
        rows = self.trace().requests[:prompts]
        return SessionPlan(
            schedule,
            cooldown,
            tuple(s or "" for s, _ in steps[:prompts]),
            self.think_s,
            gaps=tuple(None if r.gap_s is None else r.gap_s / self.speedup for r in rows),
            spawned_by=tuple(r.spawned_by for r in rows),
            waits_for=tuple(r.waits_for for r in rows),
        )

    def load_words(self) -> str:
        t = self.trace()
        sessions = len({r.session if r.session is not None else f"row {i}" for i, r in enumerate(t.requests)})
        subagents = len({r.session for r in t.requests if r.depth})
        pace = ("each session a closed loop, every step after the reply before it" +
                (f", {subagents} of them subagents started by their parent's step" if subagents else "")
                if self.order == "session" else
                f"at {self.rate:g} req/s in its order" if self.rate else
                "at its recorded times" + (f", {self.speedup:g}x as fast" if self.speedup != 1 else ""))
        return f"a replayed {self.format} trace ({len(t.requests)} requests in {sessions} sessions, {pace})"

    def delivered_load(self, point: dict) -> float | None:
        """Replayed by timestamp, the send rate; by session, the steps the sessions sent (their rate
        follows each engine's replies, as a closed loop's does, so it is not held equal)."""
        if self.order == "session":
            return (point.get("session_order") or {}).get("steps")
        return point.get("achieved_rate_rps")

    def bind_context(self, context_length: int) -> None:
        """The context the sessions must fit in, where `fit: drop` leaves out those that do not."""
        self._context, self._fitted = context_length, None

    @model_validator(mode="after")
    def _timed_or_paced(self) -> "TraceReplay":
        if not FORMATS[self.format].timed and self.rate is None:
            raise ValueError(f"format {self.format!r} records no arrival times: give rate (requests a second) to "
                             "pace its requests")
        if self.think_s is not None and self.order != "session":
            raise ValueError("think_s paces a session's steps: set order: session, or remove think_s")
        if FORMATS[self.format].timed and self.rate is not None:
            raise ValueError(f"format {self.format!r} records its own arrival times: remove rate (speedup scales them)")
        if self.block_tokens is not None and self.format != "mooncake":
            raise ValueError(f"block_tokens states the block size of Mooncake-style lines; format {self.format!r} "
                             "states its own (or has none): remove block_tokens")
        if self.subagent_time != "absolute" and self.format != "weka":
            raise ValueError(
                f"subagent_time reads weka agent traces; format {self.format!r} has no subagents: remove it"
            )
        if self.length_scale is not None and self.format in ("openai", "sharegpt"):
            raise ValueError(f"length_scale scales a trace's recorded lengths; format {self.format!r} replays recorded "
                             "text, which cannot be scaled: remove length_scale (arrival.sessions or fit: drop keep "
                             "whole sessions instead)")
        return self

    def arrival_law(self) -> ArrivalLaw:
        return ArrivalLaw("trace", None, False)

    @field_validator("path")
    @classmethod
    def _exists(cls, v: str) -> str:
        if not resolve_symbolic(v).exists():
            raise ValueError(f"trace file {v!r} does not exist; give a JSONL or CSV file with timestamp_s, "
                             "prompt_tokens and output_tokens")
        return v

    def raw_trace(self):
        options = {"block_tokens": self.block_tokens} if self.format == "mooncake" else (
            {"subagent_time": self.subagent_time} if self.format == "weka" else {})
        return read_trace_file(resolve_symbolic(self.path), self.format, **options)

    def trace(self):
        """The trace as replayed: scaled by `length_scale`, then fitted (loadgen.trace_fit) to
        `sessions` and, with fit: drop, to the context."""
        raw = self.raw_trace()
        if self._fitted is None or self._fitted[0] is not raw:
            context = self._context if self.fit == "drop" else None
            t = scaled(raw, self.length_scale) if self.length_scale else raw
            self._fitted = (raw, fitted(t, self.sessions, context) if self.sessions or context else t)
        return self._fitted[1]

    def requests(self) -> list[dict]:
        """The trace's rows: timestamp_s (from the first), prompt_tokens, output_tokens."""
        return [{"timestamp_s": r.timestamp_s, "prompt_tokens": r.prompt_tokens, "output_tokens": r.output_tokens}
                for r in self.trace().requests]

    def implied_reuse(self) -> dict | None:
        return implied_reuse(self.trace())

    def prompt_blocks(self, level: LoadLevel) -> tuple[int, list[tuple[int, ...]]] | None:
        t = self.trace()
        return (t.block_tokens, [r.hash_ids for r in t.requests]) if t.block_tokens else None

    def recorded_messages(self, level: LoadLevel) -> list[list[dict]] | None:
        t = self.trace()
        return [list(r.messages) for r in t.requests] if t.has_content else None

    def content_is_private(self) -> bool:
        return self.trace().has_content and not self.keep_content

    def session_steps(self) -> list[tuple[str | None, int]] | None:
        t = self.trace()
        return [(r.session, r.turn) for r in t.requests] if any(r.session for r in t.requests) else None

    def session_links(self) -> list[tuple[tuple[str, int] | None, tuple[str, ...]]] | None:
        t = self.trace()
        if not any(r.spawned_by or r.waits_for for r in t.requests):
            return None
        return [(r.spawned_by, r.waits_for) for r in t.requests]

    def evidence(self) -> dict:
        from stackbook.evidence.files import file_sha256

        path = resolve_symbolic(self.path)
        if not path.exists():
            return {"trace_sha256": "unknown: the trace file is not on this machine"}
        t = self.trace()
        content = ("none: the format records lengths only" if not t.has_content else
                   "kept in the outputs (keep_content: true)" if self.keep_content else
                   "not kept: bodies as digests and lengths, replies as lengths")
        out = {"trace_sha256": file_sha256(path), "trace_requests": len(t.requests), "content": content,
               "left_out": dict(t.left_out), "rows_read": len(self.raw_trace().requests)}
        if self.length_scale:
            raw = self.raw_trace()
            out["length_scale"] = {"scale": self.length_scale, "block_tokens": [raw.block_tokens, t.block_tokens],
                                   "longest_request_tokens": [max(r.prompt_tokens + r.output_tokens for r in x.requests)
                                                              for x in (raw, t)]}
        return out

    def load_levels(self) -> list[LoadLevel]:
        return [{"level": "trace", "trace": self.path, "speedup": self.speedup}]

    def prompts_at(self, level: LoadLevel, protocol: PointCounts) -> int:
        return len(self.requests())

    def measured_at(self, level: LoadLevel, protocol: PointCounts) -> int:
        return len(self.requests())

    def prompt_lengths(self, level: LoadLevel) -> list[tuple[int, int]]:
        return [(r["prompt_tokens"], r["output_tokens"]) for r in self.requests()]

    def schedule(self, level: LoadLevel, n: int, seed: int) -> list[float]:
        if self.rate is not None:  # an untimed trace: its order, evenly spaced
            return [i / self.rate for i in range(min(n, len(self.requests())))]
        return [r["timestamp_s"] / self.speedup for r in self.requests()[:n]]

    def longest_request_tokens(self) -> int:
        return max(r["prompt_tokens"] + r["output_tokens"] for r in self.requests())

    def over_context(self, context_length: int) -> str | None:
        """Why the trace does not fit `context_length`, naming its first session that does not;
        None where it fits (after `fit: drop` has left such sessions out)."""
        if self.fit == "drop":
            self.bind_context(context_length)
        over = too_long(self.trace(), context_length)
        if not over:
            return None
        session, row, tokens = over[0]
        fix = "raise context_length, "
        if self.format not in ("openai", "sharegpt"):
            raw = self.raw_trace()
            s = fitting_scale(raw, context_length)
            blocks = (f", {raw.block_tokens}-token blocks becoming {raw.block_tokens * s:g}"
                      if s and raw.block_tokens and any(r.hash_ids for r in raw.requests) else "")
            fix += (f"set arrival.length_scale: {s:g} (the largest scale that fits: every prompt and reply scaled, "
                    f"the block structure kept{blocks}), " if s
                    else "(no length_scale fits: its blocks would fall below 8 tokens), ")
        return (f"the trace's {session} (row {row}) needs {tokens} tokens, prompt and reply, but context_length is "
                f"{context_length}" + (f", and {len(over) - 1} more request(s) do too" if len(over) > 1 else "") +
                f"{f' at length_scale {self.length_scale:g}' if self.length_scale else ''}; {fix}or set arrival.fit: "
                "drop to leave such sessions out whole, or arrival.sessions to keep fewer (the passport counts what "
                "is left out); a trace is never cut short")
