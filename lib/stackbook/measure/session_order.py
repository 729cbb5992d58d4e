"""Whether a replayed log kept its sessions' order, from the records: each session's steps sent in
their recorded order, and each step sent after the step before it was answered (an agent cannot
act on a reply it has not read). An open-loop replay keeps the first by its schedule; the second
holds only while the engine answers within the recorded think time, so it is counted, not assumed."""
from __future__ import annotations

from stackbook.loadgen.phases import MEASURED_LOAD


def session_order(records, steps: list[tuple[str | None, int]]) -> dict | None:
    """Over one point's records (request_index = the trace's row), with each row's (session, turn):
    the sessions and steps seen, the steps sent before an earlier step of their session
    (`out_of_order`), and those sent before the previous step's reply ended
    (`before_previous_reply`), with the worst such overlap in ms. None where no row has a session."""
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
    return {"sessions": len(by_session), "steps": sum(len(v) for v in by_session.values()),
            "out_of_order": out_of_order, "before_previous_reply": early,
            "before_previous_reply_ms_max": round(worst_ms, 3)}
