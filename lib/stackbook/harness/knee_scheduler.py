"""A batch scheduler with a capacity knee, as arithmetic and as a deterministic simulation.

A capacity search is only trustworthy if it finds a capacity that is known beforehand. This model
is small enough to know: at most `max_batch` (B) sequences decode together; one step over b
sequences takes t0 + t1*b; requests beyond B wait in a FIFO queue and join at a step boundary; a
request spends `prefill_steps` steps in the batch before its first token, then one step per
further token. Below the knee TTFT and TPOT are exactly one step at b = concurrency; past it TPOT
stays at the step time for B and TTFT grows with the queue. The same model runs one step at a
time (`StepBatch`, which the calibration server drives against the clock) and as an
event-by-event simulation of a closed loop (`simulate_closed_loop`, fast enough for thousands of
seeded runs); `harness/knee_truth.py` turns it into the true capacity under an SLO.
"""
from __future__ import annotations

import heapq
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field, model_validator


class Knee(BaseModel):
    """The scheduler's constants. A request that reaches the server within `admit_window_ms` of a
    step's start joins that step: a closed-loop client's next request, sent as its previous reply
    ends, then joins the next step, as the model's zero turnaround says."""
    max_batch: int = Field(ge=1, description="B: sequences decoded together at most")
    t0_ms: float = Field(ge=0, description="a step's fixed cost")
    t1_ms: float = Field(ge=0, description="a step's cost per sequence in the batch")
    prefill_steps: int = Field(1, ge=1, description="steps in the batch before a request's first token")
    admit_window_ms: float = Field(0.0, ge=0, description="the served scheduler's admission window")

    @model_validator(mode="after")
    def _window_inside_a_step(self) -> "Knee":
        if self.admit_window_ms > self.t0_ms:
            raise ValueError(f"admit_window_ms {self.admit_window_ms} must not exceed t0_ms {self.t0_ms}: "
                             "the window is part of every step")
        return self

    @classmethod
    def parse(cls, text: str, admit_window_ms: float | None = None) -> "Knee":
        """'B,t0_ms,t1_ms' (as `--knee 8,20,2`), the window defaulting to min(2 ms, t0)."""
        parts = [p.strip() for p in text.split(",")]
        try:
            if len(parts) != 3:
                raise ValueError
            b, t0, t1 = int(parts[0]), float(parts[1]), float(parts[2])
        except ValueError:
            raise ValueError(f"--knee {text!r}: expected B,t0_ms,t1_ms, e.g. --knee 8,20,2") from None
        window = min(2.0, t0) if admit_window_ms is None else admit_window_ms
        return cls(max_batch=b, t0_ms=t0, t1_ms=t1, admit_window_ms=window)

    def step_s(self, batch: int) -> float:
        """Seconds one step takes over `batch` sequences."""
        return (self.t0_ms + self.t1_ms * batch) / 1000.0

    def steps_of(self, output_tokens: int) -> int:
        """Steps a request of `output_tokens` tokens spends in the batch."""
        return self.prefill_steps + max(1, output_tokens) - 1


@dataclass(frozen=True)
class Lengths:
    """Output lengths: `mean` tokens, each drawn uniformly within +-`jitter` of it (relative),
    never under 2 so every request has a TPOT."""
    mean: int = 64
    jitter: float = 0.0

    def draw(self, rng: random.Random) -> int:
        if self.jitter <= 0:
            return max(2, self.mean)
        lo = max(2, round(self.mean * (1 - self.jitter)))
        hi = max(lo, round(self.mean * (1 + self.jitter)))
        return rng.randint(lo, hi)


@dataclass(frozen=True)
class RequestTiming:
    """One simulated request (seconds from the loop's start)."""
    index: int           # send order
    output_tokens: int
    arrival_s: float
    admitted_s: float
    first_token_s: float
    end_s: float

    @property
    def ttft_s(self) -> float:
        return self.first_token_s - self.arrival_s

    @property
    def e2e_s(self) -> float:
        return self.end_s - self.arrival_s

    @property
    def tpot_s(self) -> float:
        return (self.end_s - self.first_token_s) / (self.output_tokens - 1)


@dataclass(frozen=True)
class SloBounds:
    """Per-request bounds (seconds); a request meets the SLO when it is within every bound set."""
    ttft_s: float | None = None
    tpot_s: float | None = None

    def met(self, t: RequestTiming) -> bool:
        return ((self.ttft_s is None or t.ttft_s <= self.ttft_s)
                and (self.tpot_s is None or t.tpot_s <= self.tpot_s))


@dataclass(frozen=True)
class LoopRun:
    """A closed loop's requests in send order, and when its last reply ended."""
    timings: tuple[RequestTiming, ...]
    duration_s: float

    def measured(self, warmup: int, cooldown: int) -> tuple[RequestTiming, ...]:
        """The requests a point measures: the first `warmup` and last `cooldown` sent are not."""
        return self.timings[warmup:len(self.timings) - cooldown]


def simulate_closed_loop(knee: Knee, concurrency: int, requests: int, lengths: Lengths = Lengths(),
                         seed: int = 0) -> LoopRun:
    """`concurrency` clients, each sending its next request the moment its previous one ends,
    `requests` in all. Jumps from one first-token or finish to the next (the batch's size, hence
    the step time, only changes there), so a run costs O(requests log requests)."""
    if concurrency < 1 or requests < 1:
        raise ValueError("concurrency and requests must be at least 1")
    rng = random.Random(seed)
    out_tokens: list[int] = []
    arrival: list[float] = []
    admitted: list[float] = []
    first: list[float] = []
    end: list[float] = []
    events: list[tuple[int, int, int]] = []  # (step, kind 0 first token / 1 finish, request)
    queue: deque[int] = deque()
    now, step, batch = 0.0, 0, 0

    def send(at: float) -> None:
        i = len(out_tokens)
        out_tokens.append(lengths.draw(rng))
        arrival.append(at)
        admitted.append(0.0)
        first.append(0.0)
        end.append(0.0)
        queue.append(i)

    def admit() -> None:
        nonlocal batch
        while queue and batch < knee.max_batch:
            i = queue.popleft()
            admitted[i] = now
            batch += 1
            heapq.heappush(events, (step + knee.prefill_steps, 0, i))
            heapq.heappush(events, (step + knee.steps_of(out_tokens[i]), 1, i))

    for _ in range(min(concurrency, requests)):
        send(0.0)
    admit()
    while events:
        at = events[0][0]
        now += (at - step) * knee.step_s(batch)
        step = at
        while events and events[0][0] == step:
            _, kind, i = heapq.heappop(events)
            if kind == 0:
                first[i] = now
            else:
                end[i] = now
                batch -= 1
                if len(out_tokens) < requests:
                    send(now)
        admit()
    timings = tuple(RequestTiming(i, out_tokens[i], arrival[i], admitted[i], first[i], end[i])
                    for i in range(len(out_tokens)))
    return LoopRun(timings, now)


def steady_state(knee: Knee, concurrency: int, mean_steps: float) -> dict[str, float]:
    """Closed-form steady state of the closed loop with zero turnaround: below the knee every step
    holds `concurrency` sequences; past it B, and the rest wait. Throughput is B / (mean steps x
    step time) past the knee, and the mean response time follows from Little's law (c = X R)."""
    b = min(concurrency, knee.max_batch)
    step = knee.step_s(b)
    throughput = b / (mean_steps * step)
    response = concurrency / throughput
    return {"batch": b, "step_s": step, "tpot_s": step, "throughput_rps": throughput,
            "e2e_mean_s": response, "wait_mean_s": response - mean_steps * step}


@dataclass
class _Seq:
    item: Any
    steps: int
    done: int = 0


@dataclass
class StepBatch:
    """The scheduler one step at a time, for a server that runs it against the clock: `admit`
    at a step's start (FIFO, up to B), `step_s` for how long the step lasts, `finish_step` at its
    end for the tokens it produced."""
    knee: Knee
    queue: deque = field(default_factory=deque)
    running: list[_Seq] = field(default_factory=list)

    def submit(self, item: Any, output_tokens: int) -> None:
        self.queue.append(_Seq(item, self.knee.steps_of(output_tokens)))

    def admit(self) -> list[Any]:
        """Move waiting requests into the batch, oldest first; returns those admitted."""
        joined = []
        while self.queue and len(self.running) < self.knee.max_batch:
            seq = self.queue.popleft()
            self.running.append(seq)
            joined.append(seq.item)
        return joined

    def step_s(self) -> float:
        return self.knee.step_s(len(self.running))

    def finish_step(self) -> list[tuple[Any, int, bool]]:
        """Each sequence's token from the step just ended: (item, token index, last); sequences
        still in prefill produce none. The finished leave the batch."""
        out, still = [], []
        for seq in self.running:
            seq.done += 1
            token = seq.done - self.knee.prefill_steps
            last = seq.done == seq.steps
            if token >= 0:
                out.append((seq.item, token, last))
            if not last:
                still.append(seq)
        self.running = still
        return out

    @property
    def idle(self) -> bool:
        return not self.running and not self.queue
