"""The calibration server's paced mode: every stream gets a known TTFT and inter-token gap.

Against a zero-latency server the client's floor is measured; against a paced one, its fidelity
at any concurrency: the truth of every stream is known, and the server records when it sent each
event, so the client's per-event receive delay is measured directly (both sides read the same
system-wide monotonic clock, `time.perf_counter()`). Deadlines are absolute (arrival + TTFT +
the gaps so far), so a late send never delays the next one; one timer per server loop sends all
that is due, whatever the number of streams.
"""
from __future__ import annotations

import asyncio
import heapq
import random
import time
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field

# Events due within this long of a wake-up are sent in that wake-up: the loop's timers have a
# millisecond's resolution, and a shorter wait would wake at once, again and again, until due.
# Every send time is recorded, so the truth is what was sent, not what was due.
SEND_AHEAD_S = 0.0005
MIN_WAIT_S = 0.001
# At most this many sends per turn of the loop: a server fallen behind (a busy host) still reads
# the requests arriving meanwhile, so their arrival times stay the truth's start, not its lag.
SENDS_PER_TURN = 64


class Pacing(BaseModel):
    """The truth the paced server keeps per stream; jitter draws are added to each gap (and to
    the TTFT) with mean zero, so the mean gap stays `gap_ms`."""
    ttft_ms: float = Field(50.0, ge=0, description="from the request's arrival to its first token")
    gap_ms: float = Field(10.0, gt=0, description="between consecutive tokens of a stream")
    jitter: Literal["none", "uniform", "normal", "exponential"] = "none"
    jitter_ms: float = Field(0.0, ge=0, description="half-width (uniform), sd (normal) or mean (exponential)")
    seed: int = 0

    def draw(self, rng: random.Random) -> float:
        """One jitter draw in milliseconds (mean zero; never makes a gap negative)."""
        if self.jitter == "none" or self.jitter_ms == 0:
            return 0.0
        if self.jitter == "uniform":
            return rng.uniform(-self.jitter_ms, self.jitter_ms)
        if self.jitter == "normal":
            return rng.gauss(0.0, self.jitter_ms)
        return rng.expovariate(1.0 / self.jitter_ms) - self.jitter_ms

    def deadlines(self, arrival: float, n: int, rng: random.Random) -> list[float]:
        """When each of a stream's n events is due (perf_counter seconds)."""
        if self.jitter == "none" or self.jitter_ms == 0:
            first, gap = arrival + self.ttft_ms / 1000, self.gap_ms / 1000
            return [first + i * gap for i in range(n)]
        out, at = [], arrival + max(0.0, self.ttft_ms + self.draw(rng)) / 1000
        for _ in range(n):
            out.append(at)
            at += max(0.0, self.gap_ms + self.draw(rng)) / 1000
        return out


@dataclass
class PacedStream:
    """One stream: what to write at each deadline, and when it was really written."""
    key: str
    arrival: float
    due: list[float]
    events: list[bytes]
    transport: asyncio.WriteTransport
    done: asyncio.Future
    sent: list[float] = field(default_factory=list)

    def log(self) -> dict:
        return {"key": self.key, "arrival": self.arrival, "due": self.due, "sent": self.sent}


class PacedSender:
    """All paced streams of one server loop, in one heap by next deadline."""

    def __init__(self, pacing: Pacing):
        self.pacing = pacing
        self.rng = random.Random(pacing.seed)
        self._heap: list[tuple[float, int, PacedStream]] = []
        self._seq = 0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")
        self.finished: list[dict] = []  # the log of every ended stream, until read

    def stream(self, key: str, arrival: float, events: list[bytes], transport) -> PacedStream:
        """Start pacing a stream's events; await its `done` future for its end."""
        s = PacedStream(key, arrival, self.pacing.deadlines(arrival, len(events), self.rng), events, transport,
                        asyncio.get_running_loop().create_future())
        self._push(s)
        return s

    def _push(self, s: PacedStream) -> None:
        at = s.due[len(s.sent)]
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, s))
        if at < self._timer_at - MIN_WAIT_S:
            self._arm(at)

    def _arm(self, at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        # Never under a millisecond: a shorter timer fires at the loop's next turn, before it is due.
        self._timer = asyncio.get_running_loop().call_later(max(MIN_WAIT_S, at - time.perf_counter() - SEND_AHEAD_S),
                                                            self._send_due)

    def _send_due(self) -> None:
        self._timer, self._timer_at = None, float("inf")
        heap, budget = self._heap, SENDS_PER_TURN
        while heap and heap[0][0] <= time.perf_counter() + SEND_AHEAD_S and budget:
            budget -= 1
            _, _, s = heapq.heappop(heap)
            if s.done.done():  # the connection went away
                continue
            try:
                s.transport.write(s.events[len(s.sent)])
            except (RuntimeError, ConnectionError):
                s.done.set_result(False)
                continue
            s.sent.append(time.perf_counter())
            if len(s.sent) == len(s.events):
                self.finished.append(s.log())
                s.done.set_result(True)
            else:
                at = s.due[len(s.sent)]
                self._seq += 1
                heapq.heappush(heap, (at, self._seq, s))
        if heap and not budget:
            self._timer_at = heap[0][0]
            self._timer = asyncio.get_running_loop().call_soon(self._send_due)
        elif heap:
            self._arm(heap[0][0])

    def take_log(self) -> list[dict]:
        """Every stream ended since the last call, and forget them."""
        out, self.finished = self.finished, []
        return out
