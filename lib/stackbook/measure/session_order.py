"""Whether a replayed log kept its sessions' order, from the records: each session's steps sent in
their recorded order, and each step sent after the step before it was answered (an agent cannot
act on a reply it has not read). An open-loop replay keeps the first by its schedule; the second
holds only while the engine answers within the recorded think time, so it is counted, not assumed.
An agent trace's subagents add two more: a subagent's first step sent before the reply to the
parent step that starts it ended, and a parent step sent before the last reply of a subagent it
waits for ended."""
from __future__ import annotations

from stackbook.loadgen.phases import MEASURED_LOAD


def session_order(records, steps: list[tuple[str | None, int]], links: list | None = None) -> dict | None:
    """Over one point's records (request_index = the trace's row), with each row's (session, turn):
    the sessions and steps seen, the steps sent before an earlier step of their session
    (`out_of_order`), and those sent before the previous step's reply ended
    (`before_previous_reply`), with the worst such overlap in ms; with `links` (each row's
    (spawning (session, turn) or None, sessions it waits for)), the subagents seen and the steps
    sent before what they wait on (`before_spawning_reply`, `before_subagent_end`). None where no
    row has a session."""
    if not any(s is not None for s, _ in steps):
        return None
    by_session: dict[str, list[tuple[int, object]]] = {}
    for r in records:
        if r.phase in MEASURED_LOAD and r.request_index < len(steps):
            session, turn = steps[r.request_index]
            if session is not None:
                by_session.setdefault(session, []).append((turn, r))
    out_of_order = early = 0
    worst_ms = 0.0
    for seq in by_session.values():
        seq.sort(key=lambda x: x[0])
        for (_, prev), (_, cur) in zip(seq, seq[1:]):
            if cur.sent_s < prev.sent_s:
                out_of_order += 1
            if cur.sent_s < prev.end_s:
                early += 1
                worst_ms = max(worst_ms, (prev.end_s - cur.sent_s) * 1000)
    out = {"sessions": len(by_session), "steps": sum(len(v) for v in by_session.values()),
           "out_of_order": out_of_order, "before_previous_reply": early,
           "before_previous_reply_ms_max": round(worst_ms, 3)}
    if links:
        out |= subagent_order(records, steps, links)
    return out


def subagent_order(records, steps: list[tuple[str | None, int]], links: list) -> dict:
    """Over one point's measured records: the subagent sessions seen, and how many steps left
    before the reply that starts them, or before the subagents they wait for had answered."""
    at: dict[tuple, object] = {}
    last: dict[str, object] = {}
    for r in records:
        if r.phase in MEASURED_LOAD and r.request_index < len(steps) and steps[r.request_index][0] is not None:
            at[steps[r.request_index]] = r
            session, turn = steps[r.request_index]
            if session not in last or steps[last[session].request_index][1] < turn:
                last[session] = r
    spawned = joined = 0
    subagents = set()
    for key, r in at.items():
        parent, waits = links[r.request_index]
        if parent is not None:
            subagents.add(key[0])
            p = at.get(tuple(parent))
            if p is not None and r.sent_s < p.end_s:
                spawned += 1
        for child in waits:
            c = last.get(child)
            if c is not None and r.sent_s < c.end_s:
                joined += 1
    return {"subagents": len(subagents), "before_spawning_reply": spawned, "before_subagent_end": joined}
