"""A replayed log's sessions, each its own closed loop: an agent acts on a reply only once it has
read it. A session's first step leaves at its recorded time; each later step waits for the reply
to the step before it, then the think time (loadgen.plans.SessionPlan). The sessions run side by
side, so the load is what the log's sessions make of this engine's replies."""
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
    """When a later step leaves (seconds from the point's start): the reply before it has ended,
    then the think time, or its recorded time if that is later and no think time is given."""
    if plan.think_s is not None:
        return reply_end + plan.think_s
    return max(reply_end, plan.schedule[step])


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

        async def one_session(chain: list[int]) -> None:
            at = plan.schedule[chain[0]]
            for k, i in enumerate(chain):
                if k:
                    at = next_deadline(plan, i, time.perf_counter() - t0)
                await sleep_until(t0 + at)
                answered = await run_prompt(client, target, prompts[i], tokenizer,
                                            base=dict(base, phase=phase_of(index[i])), t0=t0, scheduled_s=at,
                                            finisher=finisher)
                if not answered:  # the session cannot go on without the reply it acts on
                    return

        try:
            await asyncio.gather(*(one_session(c) for c in chains))
        finally:
            if probe is not None:
                probe.stop()
    return out


def run_session_loop(*args, **kwargs) -> list[RequestRecord]:
    with collector_paused():
        return run_sync(session_loop(*args, **kwargs))
