"""The unit of measurement work: a load (clients in a closed loop, an open loop's rate, or a trace's
replay speed) and one point sent at it, with the name its records carry.

The arrival patterns (config/) describe their levels as LoadLevel dicts, the form results.json
and the request records keep; a `Load` is read from that form and gives it back unchanged, so a
committed run's points keep their names and fields byte for byte."""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

LoadKind = Literal["clients", "rate", "replay"]
VALUE_KEY: dict[str, str] = {"clients": "concurrency", "rate": "rate", "replay": "speedup"}  # where a level keeps it


def load_unit(rates, speedups=()) -> str:
    """How a run's loads are named, from its points' rates and replay speeds: an open loop's rate,
    a trace's replay speed (1: as recorded), else concurrency."""
    if any(r is not None and r == r for r in rates):  # r == r: not NaN
        return "offered rate"
    return "trace speed" if any(x is not None and x == x for x in speedups) else "concurrency"


def frame_unit(frame) -> str:
    """The unit a table of points (a DataFrame, or a dict of columns) names its loads in."""
    return load_unit(frame["rate"] if "rate" in frame else [], frame["speedup"] if "speedup" in frame else [])


def clients_column(frame):
    """A table's closed-loop client counts, or None where its loads are not clients."""
    return frame["concurrency"] if "concurrency" in frame else None


def point_name(label: str, repetition: int) -> str:
    """A sweep point's name (c4-r0, rate0.5-r1, trace-r0): the records and results key on it."""
    return f"{label}-r{repetition}"


@dataclass(frozen=True)
class Load:
    """One load level: its kind, its value in that kind's unit, and the name the level goes by."""
    kind: LoadKind
    value: int | float  # clients (a whole number), requests a second, or replay speed (1: as recorded)
    label: str  # c4, rate0.5, trace
    trace: str | None = None  # the replayed trace's path

    @classmethod
    def of(cls, level: Mapping) -> Load:
        """The load an arrival pattern's level dict describes."""
        if "concurrency" in level:
            return cls("clients", level["concurrency"], level["level"])
        if "rate" in level:
            return cls("rate", level["rate"], level["level"])
        return cls("replay", level.get("speedup", 1), level["level"], level.get("trace"))

    @classmethod
    def clients(cls, n: int) -> Load:
        return cls("clients", n, f"c{n}")

    @property
    def closed_loop(self) -> bool:
        """Clients each waiting for their reply: the replies, not a clock, pace the requests."""
        return self.kind == "clients"

    @property
    def scheduled(self) -> bool:
        """Sent on a clock at an offered rate, whatever the replies do."""
        return self.kind == "rate"

    @property
    def concurrency(self) -> int | None:
        return self.value if self.kind == "clients" else None

    @property
    def rate(self) -> float | None:
        return self.value if self.kind == "rate" else None

    @property
    def speedup(self) -> float | None:
        return self.value if self.kind == "replay" else None

    def expected_span_s(self, requests: int, per_request_s: float, last_offset_s: Callable[[], float]) -> float:
        """How long `requests` take to send and finish when each takes `per_request_s`: a closed
        loop's clients in turns, an open loop's schedule then the last reply, a replay's recorded
        span (`last_offset_s`, its last send) at its speed then the last reply."""
        if self.kind == "clients":
            return math.ceil(requests / self.value) * per_request_s
        if self.kind == "rate":
            return requests / self.value + per_request_s
        return last_offset_s() / (self.value or 1) + per_request_s

    def level(self) -> dict:
        """The LoadLevel dict the arrival patterns read, keys in their order."""
        trace = {"trace": self.trace} if self.kind == "replay" and self.trace is not None else {}
        return {"level": self.label, **trace, VALUE_KEY[self.kind]: self.value}

    def fields(self) -> dict:
        """What a point's summary says of its load: the value under its kind's key."""
        return {VALUE_KEY[self.kind]: self.value}


@dataclass(frozen=True)
class LoadPoint:
    """One point to send: a load in one repetition, as a given attempt, of `requests` prompts
    (warm-up, measured and cool-down; conversations, in a multi-turn workload)."""
    load: Load
    repetition: int
    requests: int
    attempt: int | None  # the attempt to send; None for a point an earlier call finished
    name: str

    @classmethod
    def in_sweep(cls, load: Load, repetition: int, requests: int, attempt: int | None) -> LoadPoint:
        return cls(load, repetition, requests, attempt, point_name(load.label, repetition))

    @property
    def finished(self) -> bool:
        return self.attempt is None

    def record_fields(self, run_id: str, arm: str) -> dict:
        """The fields every request record of this point carries (concurrency 0 where it is not a closed loop)."""
        return {"run_id": run_id, "arm": arm, "point": self.name, "repetition": self.repetition,
                "concurrency": self.load.concurrency or 0, "attempt": self.attempt}
