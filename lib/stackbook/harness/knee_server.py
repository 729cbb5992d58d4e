"""The calibration server's knee mode: streams produced by the knee scheduler, step by step, on
the server's clock.

Where the paced mode gives every stream the same truth whatever the load, this one gives a truth
that depends on the load as an engine's does: one task runs the scheduler's steps while any
request waits or decodes; each step lasts t0 + t1*b for the b sequences admitted at its start,
and at its end every sequence past its prefill gets its next token. Step ends are absolute
(each is the previous end plus the step's length), so a late wake-up does not stretch the
schedule. Every stream's arrival, admission and send times are kept (GET /knee).
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from stackbook.harness.knee_scheduler import Knee, StepBatch


async def _sleep_until(deadline: float) -> None:
    """Until `deadline` (perf_counter seconds) has passed; the loop's timers may wake early."""
    while (delay := deadline - time.perf_counter()) > 0:
        await asyncio.sleep(delay)


@dataclass
class KneeStream:
    """One stream: its events, one per token, and when each was really written."""
    key: str
    arrival: float
    events: list[bytes]
    transport: asyncio.WriteTransport
    done: asyncio.Future
    admitted: float | None = None
    sent: list[float] = field(default_factory=list)
    lost: bool = False

    def log(self) -> dict:
        return {"key": self.key, "arrival": self.arrival, "admitted": self.admitted, "sent": self.sent}


class KneeSender:
    """All knee-scheduled streams of one server loop, and the one task that steps them."""

    def __init__(self, knee: Knee):
        self.knee = knee
        self.batch = StepBatch(knee)
        self._task: asyncio.Task | None = None
        self.finished: list[dict] = []  # the log of every ended stream, until read
        self.steps: list[tuple[float, int]] = []  # (step end, batch size) of every step, until read

    def stream(self, key: str, arrival: float, events: list[bytes], transport) -> KneeStream:
        """Queue a stream for the batch; await its `done` future for its end."""
        s = KneeStream(key, arrival, events, transport, asyncio.get_running_loop().create_future())
        self.batch.submit(s, len(events))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(time.perf_counter()))
        return s

    async def _run(self, start: float) -> None:
        """Steps back to back from `start` until nothing waits or decodes."""
        window = self.knee.admit_window_ms / 1000
        while not self.batch.idle:
            await _sleep_until(start + window)
            for s in self.batch.admit():
                s.admitted = start
            end = start + self.batch.step_s()
            await _sleep_until(end)
            self.steps.append((end, len(self.batch.running)))
            for s, token, last in self.batch.finish_step():
                self._write(s, token)
                if last:
                    self.finished.append(s.log())
                    if not s.done.done():
                        s.done.set_result(not s.lost)
            start = end

    @staticmethod
    def _write(s: KneeStream, token: int) -> None:
        if s.lost or s.transport.is_closing():
            s.lost = True
            return
        try:
            s.transport.write(s.events[token])
        except (RuntimeError, ConnectionError):
            s.lost = True
            return
        s.sent.append(time.perf_counter())

    def take_log(self) -> dict:
        """Every stream ended and every step taken since the last call, and forget them."""
        out = {"streams": self.finished, "steps": self.steps}
        self.finished, self.steps = [], []
        return out
