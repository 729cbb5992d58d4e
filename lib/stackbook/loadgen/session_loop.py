"""A replayed log's sessions, each its own closed loop: an agent acts on a reply only once it has
read it. A session's first step leaves at its recorded time; each later step waits for the reply
to the step before it, then the think time (loadgen.plans.SessionPlan). The sessions run side by
side, so the load is what the log's sessions make of this engine's replies. An agent trace's
subagents are sessions started by their parent's step: each starts once that step's reply has
ended (then its recorded tool time), and the parent's step that waits for it leaves only once its
last reply has."""
from __future__ import annotations

import asyncio
import time

from stackbook.loadgen.drivers import (Finisher, Target, collector_paused, keep, phases, run_prompt, run_sync,
                                       sleep_until)
from stackbook.loadgen.loop_lag import LoopLag
from stackbook.loadgen.plans import SessionPlan
from stackbook.loadgen.records import RecordWriter, RequestRecord
from stackbook.loadgen.workload import PromptSpec


def session_chains(plan: SessionPlan, n: int) -> list[list[int]]:
    """The prompts' positions grouped by session, each in sending order (a prompt without a session
    is a session of its own); sessions ordered by their first step's time."""
    chains: dict[str, list[int]] = {}
    for i in range(n):
        key = plan.sessions[i] if i < len(plan.sessions) and plan.sessions[i] else f"\x00{i}"
        chains.setdefault(key, []).append(i)
    return sorted(chains.values(), key=lambda c: plan.schedule[c[0]])


def next_deadline(plan: SessionPlan, step: int, reply_end: float) -> float:
    """When a later step leaves (seconds from the point's start): what it waits on has ended
    (`reply_end`), then the think time; else the idle time the trace recorded before it (a tool's
    time); else its recorded time if that is later."""
    if plan.think_s is not None:
        return reply_end + plan.think_s
    gap = plan.gaps[step] if step < len(plan.gaps) else None
    if gap is not None:
        return reply_end + gap
    return max(reply_end, plan.schedule[step])


class _Sessions:
    """What the sessions of one point tell each other: when each step's reply ended (None: it was
    not answered), and when each session has finished."""

    def __init__(self, names: list[str]):
        self.step_end: dict[tuple[str, int], float | None] = {}
        self.step_done: dict[tuple[str, int], asyncio.Event] = {}
        self.done = {n: asyncio.Event() for n in names}
        self.last_end: dict[str, float | None] = {}

    def step_event(self, key: tuple[str, int]) -> asyncio.Event:
        return self.step_done.setdefault(key, asyncio.Event())

    def answered(self, key: tuple[str, int], end: float | None) -> None:
        self.step_end[key] = end
        self.step_event(key).set()

    def finish(self, name: str, steps: int, end: float | None) -> None:
        """A session ends (answered through, or stopped): its unsent steps never answer."""
        for k in range(steps):
            if (name, k) not in self.step_end:
                self.answered((name, k), None)
        self.last_end[name] = end
        self.done[name].set()


async def session_loop(target: Target, prompts: list[PromptSpec], tokenizer, *, plan: SessionPlan, warmup: int,
                       writer: RecordWriter | None, base: dict, progress=None, alive=lambda: True,
                       start: float | None = None, positions: list[int] | None = None, total: int | None = None,
                       probe: LoopLag | None = None) -> list[RequestRecord]:
    """Send each session's steps in order, each after the reply to the one before it. A step's
    `scheduled_s` is the deadline this rule gave it, so its lag is the client's alone."""
    phase_of = phases(total or len(prompts), warmup, plan.cooldown)
    index = positions or list(range(len(prompts)))
    out: list[RequestRecord] = []
    finisher = Finisher(tokenizer, lambda rec: keep(rec, out, writer, progress, alive))
    chains = session_chains(plan, len(prompts))
    async with target.stream_client() as client, finisher:
        await client.preopen(len(chains))  # each session is a client: its connection is opened before the clock
        t0 = start if start is not None else time.perf_counter()
        if probe is not None:
            probe.start()

        names = [plan.sessions[c[0]] if c[0] < len(plan.sessions) and plan.sessions[c[0]] else f"\x00{c[0]}"
                 for c in chains]
        shared = _Sessions(names)

        def spawner(i: int) -> tuple[str, int] | None:
            """The step whose reply starts step i's session (None: it starts on its own clock)."""
            parent = plan.spawned_by[i] if i < len(plan.spawned_by) else None
            return tuple(parent) if parent is not None and parent[0] in shared.done else None

        async def waited(i: int, ready: float) -> float | None:
            """When what step i waits on has ended (its own session's reply at `ready`, a spawning
            step's reply, subagents' last replies); None where one of them was never answered."""
            parent = spawner(i)
            if parent is not None:
                await shared.step_event(parent).wait()
                ready = shared.step_end.get(parent)
                if ready is None:
                    return None
            for child in (plan.waits_for[i] if i < len(plan.waits_for) else ()):
                if child in shared.done:
                    await shared.done[child].wait()
                    end = shared.last_end.get(child)
                    ready = max(ready, end) if end is not None else ready
            return ready

        async def one_session(name: str, chain: list[int]) -> None:
            end: float | None = None
            try:
                for k, i in enumerate(chain):
                    if k or spawner(i) is not None:
                        ready = await waited(i, time.perf_counter() - t0 if k else 0.0)
                        if ready is None:  # its parent's step was never answered: the subagent never starts
                            return
                        at = next_deadline(plan, i, ready)
                    else:
                        at = plan.schedule[i]
                    await sleep_until(t0 + at)
                    answered = await run_prompt(client, target, prompts[i], tokenizer,
                                                base=dict(base, phase=phase_of(index[i])), t0=t0, scheduled_s=at,
                                                finisher=finisher)
                    end = time.perf_counter() - t0 if answered else None
                    shared.answered((name, k), end)
                    if not answered:  # the session cannot go on without the reply it acts on
                        return
            finally:
                shared.finish(name, len(chain), end)

        try:
            await asyncio.gather(*(one_session(n, c) for n, c in zip(names, chains)))
        finally:
            if probe is not None:
                probe.stop()
    return out


def run_session_loop(*args, **kwargs) -> list[RequestRecord]:
    with collector_paused():
        return run_sync(session_loop(*args, **kwargs))
