"""The client's own delay, measured while a point runs: how long a callback made ready waits for
the load generator's event loop. A reply's bytes that arrive while the loop is busy are stamped
that much late, so this delay is the client's share of every TTFT and inter-token gap it
reports; the sweep judges each point by it (measure.validity.client_delay_validity).

A thread hands the loop a stamped callback every few milliseconds (`call_soon_threadsafe`
wakes the loop as arriving bytes would); the callback's wait is one sample. A thread, not a
timer on the loop itself: a loop held by one long callback would hold its own timer too, and
the loop's millisecond timers would blur sub-millisecond delays.
"""
from __future__ import annotations

import asyncio
import threading
import time

import numpy as np

EVERY_S = 0.005  # one sample per 5 ms: 200 a second, a negligible cost


class LoopLag:
    """Samples the running loop's delay between `start` and `stop` (seconds, in `samples`)."""

    def __init__(self, every_s: float = EVERY_S):
        self.every_s = every_s
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> "LoopLag":
        """Begin sampling the event loop this is called from."""
        self._loop = asyncio.get_running_loop()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="loop-lag", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(1)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self._loop.call_soon_threadsafe(self._landed, time.perf_counter())
            except RuntimeError:  # the loop has closed
                return

    def _landed(self, handed: float) -> None:
        if not self._stop.is_set():
            self.samples.append(time.perf_counter() - handed)

    def summary(self) -> dict:
        return delay_summary(self.samples)


def delay_summary(samples: list[float]) -> dict:
    """The delay's median, p99 and maximum in milliseconds (None without samples)."""
    if not samples:
        return {"loop_delay_ms_p50": None, "loop_delay_ms_p99": None, "loop_delay_ms_max": None,
                "loop_delay_samples": 0}
    ms = np.asarray(samples) * 1000
    return {"loop_delay_ms_p50": round(float(np.percentile(ms, 50)), 3),
            "loop_delay_ms_p99": round(float(np.percentile(ms, 99)), 3),
            "loop_delay_ms_max": round(float(ms.max()), 3), "loop_delay_samples": len(samples)}
