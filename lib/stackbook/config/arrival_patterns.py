"""Arrival patterns: how requests reach the engine at each load level of a sweep. Each pattern
knows its load levels, its cool-down, how many prompts a level sends and the schedule they
follow, and the plan a point is sent by (loadgen.plans); the schedule arithmetic itself lives in
loadgen.arrivals."""
from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, ClassVar, Literal, NamedTuple, TypedDict, Union

from pydantic import Field, PrivateAttr, field_validator, model_validator

from stackbook.config.strict import Strict
from stackbook.loadgen.arrivals import constant_schedule, gamma_schedule, poisson_schedule
from stackbook.loadgen.trace_fit import fitted, too_long
from stackbook.loadgen.trace_formats import FORMATS, implied_reuse, read_trace_file
from stackbook.loadgen.plans import ClosedPlan, OpenPlan, PointPlan, SessionPlan, TracePlan
from stackbook.locations import resolve_symbolic
from stackbook.measure.validity import (CONCURRENCY_TOLERANCE, expected_in_flight, measured_requests_for,
                                        measured_requests_to_hold)

if TYPE_CHECKING:
    from stackbook.config.protocol import Protocol

class LoadLevel(TypedDict, total=False):
    """One point of the sweep, as its records carry it: `level` names it; the other keys say
    which load it is (a closed loop's concurrency, an open loop's rate, or a trace)."""
    level: str
    concurrency: int
    rate: float
    trace: str
    speedup: float


class ArrivalLaw(NamedTuple):
    """What the open-queue formulas need to know of an arrival pattern: its name as a reader sees
    it, the squared CV its schedule draws gaps from (None for a trace: its own), and whether the
    arrivals are Poisson, the one case Pollaczek-Khinchine assumes."""
    kind: str
    scheduled_scv: float | None
    poisson: bool


class ArrivalPattern(Strict):
    kind: str  # each pattern narrows it to its own tag; declared here so dumps list it first
    plan_type: ClassVar[type] = OpenPlan  # the plan its points are sent by

    def point_plan(self, level: LoadLevel, prompts: int, seed: int, cooldown: int) -> PointPlan:
        """How this level's `prompts` prompts are sent (the last `cooldown` after the measured)."""
        return self.plan_type(self.schedule(level, prompts, seed), cooldown)

    def load_words(self) -> str:
        """The load in the report's question, where its levels are neither clients nor rates."""
        levels = self.load_levels()
        return f"{self.kind} load ({len(levels)} level{'s' if len(levels) != 1 else ''})"

    def delivered_load(self, point: dict) -> float | None:
        """The load a point delivered, as fairness holds it equal across arms: the achieved send
        rate of a schedule (the engine's replies cannot change it)."""
        return point.get("achieved_rate_rps")

    def prompt_seed(self, level: LoadLevel, seed: int) -> int:
        """The seed of this level's synthetic prompts, from the repetition's seed."""
        return seed

    def prompt_lengths(self, level: LoadLevel) -> list[tuple[int, int]] | None:
        """(prompt, output) tokens of each prompt where the pattern fixes them (a trace); None
        where the workload decides, and gating sentinels are mixed among the prompts."""
        return None

    def prompt_blocks(self, level: LoadLevel) -> tuple[int, list[tuple[int, ...]]] | None:
        """(block tokens, each prompt's block ids) where the pattern records its prompts' blocks
        (a block-hashed trace): identical ids make identical text, so the reuse it implies is real."""
        return None

    def implied_reuse(self) -> dict | None:
        """The prefix reuse the pattern's own prompts imply (loadgen.trace_formats.implied_reuse),
        where it records their blocks."""
        return None

    def recorded_messages(self, level: LoadLevel) -> list[list[dict]] | None:
        """Each prompt's chat messages where the pattern replays recorded content (a request log);
        None where prompts are synthesized."""
        return None

    def content_is_private(self) -> bool:
        """Whether what is sent and answered must stay out of the outputs (a log's own content,
        unless the campaign keeps it): bodies are then stored as digests and replies as lengths."""
        return False

    def evidence(self) -> dict:
        """What the passport records of the pattern's source beside its settings (a trace's digest)."""
        return {}

    def session_steps(self) -> list[tuple[str | None, int]] | None:
        """Each prompt's (session, turn) where the pattern replays recorded sessions; None otherwise."""
        return None

    def arrival_law(self) -> ArrivalLaw | None:
        """The open queue's arrival law; None for a closed loop: its replies, not a clock, decide
        when requests arrive, so it is a closed network (queueing.mva), not an open queue."""
        return None

    def load_levels(self) -> list[LoadLevel]:
        """One entry per load level, in sweep order."""
        raise NotImplementedError

    def cooldown_requests(self, level: LoadLevel, protocol: Protocol) -> int:
        """Requests sent after the measured ones so the last measured request still runs under
        the configured load."""
        return 0

    def load_refusal(self, measured_requests: int) -> str | None:
        """Why `measured_requests` per point cannot hold this pattern's load under the load rule
        (measure.validity), before anything is sent; None when they can."""
        return None

    def narrow_loads(self, measured_requests: int) -> list[str]:
        """Loads that `measured_requests` per point hold only narrowly: the window's edges use
        most of the tolerance, so chance decides whether the point is kept."""
        return []

    def prompts_at(self, level: LoadLevel, protocol: Protocol) -> int:
        """Prompts sent at this level (conversations, in a multi-turn workload): warm-up,
        measured and cool-down."""
        return protocol.warmup_requests + protocol.requests_per_point + self.cooldown_requests(level, protocol)

    def measured_at(self, level: LoadLevel, protocol: Protocol) -> int:
        """Prompts measured at this level (a trace measures its own rows)."""
        return protocol.requests_per_point

    def schedule(self, level: LoadLevel, n: int, seed: int) -> list[float] | None:
        """Send offsets (seconds from the start of the point) of `n` prompts, reproducible from
        `seed`; None when the replies, not a clock, decide when the next one goes."""
        return None

    def longest_request_tokens(self) -> int | None:
        """The longest request (prompt + output) the pattern itself fixes; None when the
        workload decides the lengths."""
        return None

    def over_context(self, context_length: int) -> str | None:
        """Why the pattern's own requests do not fit `context_length`; None where they do (or
        where the workload decides the lengths)."""
        return None

    @staticmethod
    def point_name(level: LoadLevel, repetition: int) -> str:
        return f"{level['level']}-r{repetition}"


class ClosedLoop(ArrivalPattern):
    """N clients, each sending its next request as soon as the previous one finishes."""
    kind: Literal["closed_loop"] = "closed_loop"
    concurrency: list[int] = Field(default_factory=lambda: [1])
    plan_type: ClassVar[type] = ClosedPlan

    def point_plan(self, level: LoadLevel, prompts: int, seed: int, cooldown: int) -> ClosedPlan:
        return ClosedPlan(level["concurrency"], cooldown)

    def delivered_load(self, point: dict) -> float | None:
        """The mean requests in flight: what the clients hold, whatever the engine's speed."""
        return point.get("in_flight_mean")

    def prompt_seed(self, level: LoadLevel, seed: int) -> int:
        return seed * 1000 + level["concurrency"]

    @field_validator("concurrency")
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("give at least one concurrency level, e.g. [1, 4]")
        if any(c <= 0 for c in v):
            raise ValueError(f"concurrency levels must be positive integers, got {v}")
        return v

    def load_levels(self) -> list[LoadLevel]:
        return [{"level": f"c{c}", "concurrency": c} for c in self.concurrency]

    def load_refusal(self, measured_requests: int) -> str | None:
        short = [c for c in self.concurrency if measured_requests < measured_requests_for(c)]
        if not short:
            return None
        c = max(short)
        return (f"requests_per_point {measured_requests} cannot hold concurrency {c}: a closed loop's window "
                f"holds about {expected_in_flight(c, measured_requests):.2f} of {c} in flight with "
                f"{measured_requests} alike measured requests (fewer with uneven ones), outside the load rule's "
                f"{CONCURRENCY_TOLERANCE:.0%}, so its points would be discarded. Fix: set requests_per_point to at "
                f"least {measured_requests_for(c)} ({measured_requests_to_hold(c)} holds with room to spare), or "
                f"drop concurrency {', '.join(map(str, short))}")

    def narrow_loads(self, measured_requests: int) -> list[str]:
        return [f"concurrency {c}: {measured_requests} measured requests hold about "
                f"{expected_in_flight(c, measured_requests):.2f} of {c} in flight (the rule keeps "
                f"{c * (1 - CONCURRENCY_TOLERANCE):.2f} and above) if alike, less with uneven lengths, so chance "
                f"can discard the point; {measured_requests_to_hold(c)} hold it with room"
                for c in self.concurrency
                if measured_requests_for(c) <= measured_requests < measured_requests_to_hold(c)]

    def cooldown_requests(self, level: LoadLevel, protocol: Protocol) -> int:
        # A fixed-count closed loop otherwise drains at its end: the last measured requests
        # would run with fewer than `concurrency` in flight.
        return level["concurrency"] - 1


class OpenLoop(ArrivalPattern):
    """Requests sent on a schedule whatever the replies do, at each of `rates`."""
    rates: list[float] = Field(description="requests per second, one sweep point each")
    # Only gamma arrivals set the burstiness; the others accept the default 1 that every run
    # directory's resolved campaign records, so earlier runs still load.
    burstiness: float = Field(1.0, gt=0, description="gamma: squared CV of inter-arrival times (1 = Poisson)")
    burstiness_is_set: ClassVar[bool] = False

    @field_validator("rates")
    @classmethod
    def _positive_rates(cls, v: list[float]) -> list[float]:
        if not v:
            raise ValueError("give at least one rate, e.g. [0.5, 1, 2]")
        if any(r <= 0 for r in v):
            raise ValueError(f"rates must be positive (requests per second), got {v}")
        return v

    @model_validator(mode="after")
    def _burstiness_only_where_set(self):
        if self.burstiness != 1.0 and not self.burstiness_is_set:
            raise ValueError(f"burstiness {self.burstiness:g} has no effect on {self.kind} arrivals; use "
                             "kind: gamma to set it, or remove burstiness")
        return self

    def load_levels(self) -> list[LoadLevel]:
        return [{"level": f"rate{r:g}", "rate": r} for r in self.rates]

    def prompt_seed(self, level: LoadLevel, seed: int) -> int:
        return seed * 1000 + int(level["rate"] * 1000)

    def cooldown_requests(self, level: LoadLevel, protocol: Protocol) -> int:
        # As many as the warm-up, so the measured requests never see the load tail off.
        return protocol.warmup_requests


class ConstantArrivals(OpenLoop):
    """Evenly spaced requests."""
    kind: Literal["constant"]

    def arrival_law(self) -> ArrivalLaw:
        return ArrivalLaw("constant", 0.0, False)

    def schedule(self, level: LoadLevel, n: int, seed: int) -> list[float]:
        return constant_schedule(level["rate"], n)


class PoissonArrivals(OpenLoop):
    """Independent arrivals: exponential gaps, as many independent users make."""
    kind: Literal["poisson"]

    def arrival_law(self) -> ArrivalLaw:
        return ArrivalLaw("poisson", 1.0, True)

    def schedule(self, level: LoadLevel, n: int, seed: int) -> list[float]:
        return poisson_schedule(level["rate"], n, seed)


class GammaArrivals(OpenLoop):
    """Gamma-distributed gaps: burstier (or more regular) than Poisson at the same mean rate."""
    kind: Literal["gamma"]
    burstiness_is_set: ClassVar[bool] = True

    def arrival_law(self) -> ArrivalLaw:
        # A gamma law of shape 1 is the exponential: burstiness 1 is a Poisson process.
        return ArrivalLaw(f"gamma (C_a² = {self.burstiness:g})", self.burstiness, self.burstiness == 1.0)

    def schedule(self, level: LoadLevel, n: int, seed: int) -> list[float]:
        return gamma_schedule(level["rate"], n, self.burstiness, seed)


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
    plan_type: ClassVar[type] = TracePlan
    _context: int | None = PrivateAttr(None)  # set by the protocol where fit is drop
    _fitted: tuple | None = PrivateAttr(None)

    def point_plan(self, level: LoadLevel, prompts: int, seed: int, cooldown: int) -> PointPlan:
        schedule = self.schedule(level, prompts, seed)
        if self.order == "timestamp":
            return TracePlan(schedule, cooldown)
        steps = self.session_steps() or []
        return SessionPlan(schedule, cooldown, tuple(s or "" for s, _ in steps[:prompts]), self.think_s)

    def load_words(self) -> str:
        t = self.trace()
        sessions = len({r.session if r.session is not None else f"row {i}" for i, r in enumerate(t.requests)})
        pace = ("each session a closed loop, every step after the reply before it" if self.order == "session" else
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
        return read_trace_file(resolve_symbolic(self.path), self.format)

    def trace(self):
        """The trace as replayed: fitted (loadgen.trace_fit) to `sessions` and, with fit: drop, to the context."""
        raw = self.raw_trace()
        if self._fitted is None or self._fitted[0] is not raw:
            context = self._context if self.fit == "drop" else None
            self._fitted = (raw, fitted(raw, self.sessions, context) if self.sessions or context else raw)
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

    def evidence(self) -> dict:
        from stackbook.evidence.files import file_sha256

        path = resolve_symbolic(self.path)
        if not path.exists():
            return {"trace_sha256": "unknown: the trace file is not on this machine"}
        t = self.trace()
        content = ("none: the format records lengths only" if not t.has_content else
                   "kept in the outputs (keep_content: true)" if self.keep_content else
                   "not kept: bodies as digests and lengths, replies as lengths")
        return {"trace_sha256": file_sha256(path), "trace_requests": len(t.requests), "content": content,
                "left_out": dict(t.left_out), "rows_read": len(self.raw_trace().requests)}

    def load_levels(self) -> list[LoadLevel]:
        return [{"level": "trace", "trace": self.path, "speedup": self.speedup}]

    def prompts_at(self, level: LoadLevel, protocol: Protocol) -> int:
        return len(self.requests())

    def measured_at(self, level: LoadLevel, protocol: Protocol) -> int:
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
        return (f"the trace's {session} (row {row}) needs {tokens} tokens, prompt and reply, but context_length is "
                f"{context_length}" + (f", and {len(over) - 1} more request(s) do too" if len(over) > 1 else "") +
                "; raise context_length, or set arrival.fit: drop to leave such sessions out whole (the passport "
                "counts them)")


Arrival = Annotated[Union[ClosedLoop, ConstantArrivals, PoissonArrivals, GammaArrivals, TraceReplay],
                    Field(discriminator="kind")]
