"""Agent traces as WEKA's kv-cache-tester and AgentX record them: one JSON object a session (a
file holds one, a JSON array of them, or one a line), with `block_size`, `hash_id_scope`,
`tool_tokens`, `system_tokens` and `requests[]`, each a step `{t, type: n|s, model, in, out,
hash_ids, api_time}` or a subagent `{t, type: subagent, agent_id, status, duration_ms, requests[]}`
whose own requests may hold subagents in turn.

Read into one request a step, its session named by the trace's `id` (a subagent's by
`id/agent_id`), with the structure a replay keeps: a subagent starts once the reply to the
parent's step before it has ended; the parent's step after it waits for the subagent's last reply
unless it was launched in the background (`status: async_launched`); and every step keeps the idle
time it was recorded with (after the reply or subagent it follows ended: the tool's time).

A subagent's step times are relative to its spawn in raw WEKA traces and absolute (from the
session's start) in AgentX's; the file does not say which, so the campaign states it
(`subagent_time`), and a reading that puts a waited-for subagent's step after the parent step that
waits for it, or before its own spawn, is refused naming the other convention.

`hash_id_scope: local` makes ids one namespace a trace: the same number in two traces is two
blocks, so ids are renumbered apart; `global` keeps them shared across the file."""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from stackbook.loadgen.trace_records import Trace, TraceRequest

WEKA_BLOCK_TOKENS = 64
SUBAGENT_TIME = ("absolute", "relative")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class WekaStep(_Strict):
    t: float = Field(ge=0, description="seconds")
    type: Literal["n", "s"]
    model: str = ""
    in_: int = Field(alias="in", ge=1)
    out: int = Field(ge=0)
    hash_ids: list[Annotated[int, Field(ge=0)]] = Field(default_factory=list)
    api_time: float | None = Field(None, ge=0)


class WekaSubagent(_Strict):
    t: float = Field(ge=0, description="seconds: the spawn")
    type: Literal["subagent"]
    agent_id: str
    status: str = "completed"
    duration_ms: float | None = Field(None, ge=0)
    requests: list["WekaEntry"]


WekaEntry = Annotated[Union[WekaStep, WekaSubagent], Field(discriminator="type")]
WekaSubagent.model_rebuild()


class WekaTrace(_Strict):
    id: str
    block_size: int = Field(gt=0)
    hash_id_scope: Literal["local", "global"]
    tool_tokens: int = Field(0, ge=0)
    system_tokens: int = Field(0, ge=0)
    requests: list[WekaEntry] = Field(min_length=1)

    @model_validator(mode="after")
    def _one_id_a_block(self):
        for where, step in _steps(self.requests, "requests"):
            need = math.ceil(step.in_ / self.block_size)
            if step.hash_ids and len(step.hash_ids) != need:
                raise ValueError(f"{where}: {len(step.hash_ids)} block ids for {step.in_} prompt tokens; "
                                 f"{self.block_size}-token blocks need {need}")
        return self


def _steps(entries, where: str):
    for i, e in enumerate(entries):
        if isinstance(e, WekaStep):
            yield f"{where}.{i}", e
        else:
            yield from _steps(e.requests, f"{where}.{i}.requests")


def _documents(path: Path) -> list[tuple[str, dict]]:
    """(where, object) of each trace in the file: one object, a JSON array, or one a line."""
    text = path.read_text()
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict):
        return [("the trace", whole)]
    if isinstance(whole, list):
        return [(f"trace {i + 1}", d) for i, d in enumerate(whole)]
    out = []
    for i, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                out.append((f"line {i}", json.loads(line)))
            except json.JSONDecodeError as err:
                raise ValueError(f"{path} line {i}: not JSON ({err.msg}); a weka file holds one trace object, "
                                 "a JSON array of them, or one a line") from None
    return out


@dataclasses.dataclass
class _Step:
    t: float
    session: str
    index: int  # its place in its session, in the trace's order
    step: WekaStep
    depth: int
    family: str
    spawned_by: tuple[str, int] | None = None
    waits_for: list[str] = dataclasses.field(default_factory=list)
    after_end: float | None = None  # the recorded end of what it waits on; None: not recorded


def _end(t: float, api_time: float | None) -> float | None:
    return None if api_time is None else t + api_time


def _walk(entries, session: str, family: str, depth: int, base: float, convention: str, where: str,
          out: list[_Step]) -> float | None:
    """Append a session's steps (and its subagents', depth first) to `out`; return the recorded
    end of its last step (None where its server time is not recorded)."""
    own: list[_Step] = []
    pending: list[tuple[str, float | None]] = []  # subagents the next step of this session waits for
    prev_end: float | None = None
    spawn_from: tuple[str, int] | None = None
    for i, e in enumerate(entries):
        t = base + e.t if convention == "relative" and depth else e.t
        if isinstance(e, WekaStep):
            s = _Step(t, session, len(own), e, depth, family, spawned_by=spawn_from if not own else None)
            if own:
                ends = [prev_end] + [end for _, end in pending]
                s.after_end = None if any(x is None for x in ends) else max(ends)
                s.waits_for = [name for name, _ in pending]
                _check_join(out, pending, t, convention, f"{where}.{i}")
            pending = []
            own.append(s)
            out.append(s)
            prev_end = _end(t, e.api_time)
            continue
        child = f"{session}/{e.agent_id}"
        if convention == "absolute" and e.requests and min(_times(e.requests)) + 1e-6 < t:
            raise ValueError(f"{where}.{i} (subagent {e.agent_id}): a step at t={min(_times(e.requests)):g} s is "
                             f"before its spawn at t={t:g} s, so its times are relative to the spawn: set "
                             "arrival.subagent_time: relative")
        first = len(out)
        end = _walk(e.requests, child, family, depth + 1, t, convention, f"{where}.{i}.requests", out)
        if first < len(out):
            out[first].spawned_by = (session, len(own) - 1) if own else None
            if own:
                out[first].after_end = prev_end
        if e.duration_ms is not None:
            end = t + e.duration_ms / 1000
        if e.status != "async_launched":
            pending.append((child, end))
    return prev_end


def _times(entries) -> list[float]:
    return [e.t for e in entries] or [math.inf]


def _check_join(out: list[_Step], pending, t: float, convention: str, where: str) -> None:
    """A step that waits for a subagent cannot have been sent before that subagent's steps were."""
    other = "absolute" if convention == "relative" else "relative"
    for name, _ in pending:
        late = [s.t for s in out if s.session == name and s.t > t + 1e-6]
        if late:
            raise ValueError(f"{where}: read as {convention} times, subagent {name.rsplit('/', 1)[-1]} sends a step "
                             f"at t={max(late):g} s, after this step at t={t:g} s that waits for it; the trace's "
                             f"subagent times are likely {other}: set arrival.subagent_time: {other}")


def read_weka(path: str | Path, subagent_time: str = "absolute") -> Trace:
    """The agent traces in `path`, one request a step in arrival order (timestamps from the first
    step; every trace of the file starts at the replay's start), with their sessions' structure."""
    if subagent_time not in SUBAGENT_TIME:
        raise ValueError(f"subagent_time {subagent_time!r}: give one of {list(SUBAGENT_TIME)}")
    path = Path(path)
    traces: list[WekaTrace] = []
    for where, doc in _documents(path):
        if not isinstance(doc, dict):
            raise ValueError(
                f"{path} {where}: a trace is a JSON object with id, block_size, hash_id_scope and requests"
            )
        try:
            traces.append(WekaTrace.model_validate(doc))
        except ValidationError as err:
            first = err.errors()[0]
            field = ".".join(str(x) for x in first["loc"]) or "the trace"
            raise ValueError(f"{path} {where}, field {field}: {first['msg']} (format 'weka' reads id, block_size, "
                             "hash_id_scope, requests[] of {t, type: n|s|subagent, in, out, hash_ids, api_time})"
                             ) from None
    if not traces:
        raise ValueError(f"{path}: the file holds no trace")
    sizes = {t.block_size for t in traces}
    if len(sizes) > 1:
        raise ValueError(f"{path}: its traces state block sizes {sorted(sizes)}; one file replays one block size")
    steps: list[_Step] = []
    ids: dict[tuple[int, int], int] = {}
    names: dict[str, int] = {}
    for k, tr in enumerate(traces):
        root = tr.id if tr.id not in names else f"{tr.id}#{names[tr.id]}"
        names[tr.id] = names.get(tr.id, 0) + 1
        mine: list[_Step] = []
        try:
            _walk(tr.requests, root, root, 0, 0.0, subagent_time, "requests", mine)
        except ValueError as err:
            raise ValueError(f"{path} trace {tr.id!r}, {err}") from None
        for s in mine:  # local ids: one namespace a trace; global: one for the file
            scope = k if tr.hash_id_scope == "local" else -1
            s.step = s.step.model_copy(update={"hash_ids": [ids.setdefault((scope, h), len(ids))
                                                            for h in s.step.hash_ids]})
        steps.extend(mine)
    for s in steps:
        if s.step.hash_ids == [] and any(x.step.hash_ids for x in steps):
            raise ValueError(f"{path} session {s.session!r} step {s.index}: no hash_ids, where other steps have them; "
                             "a replay builds every prompt from its blocks")
    order = {name: i for i, name in enumerate(dict.fromkeys(s.session for s in steps))}
    steps.sort(key=lambda s: (s.t, order[s.session], s.index))
    t0 = steps[0].t
    out = [TraceRequest(round(s.t - t0, 6), s.step.in_, max(1, s.step.out), tuple(s.step.hash_ids),
                        session=s.session, turn=s.index, family=s.family, depth=s.depth, spawned_by=s.spawned_by,
                        waits_for=tuple(s.waits_for), api_time_s=s.step.api_time,
                        gap_s=None if s.after_end is None else round(max(0.0, s.t - s.after_end), 6))
           for s in steps]
    return Trace("weka", out, sizes.pop())


def mooncake_lines(trace: Trace) -> str:
    """The trace as Mooncake-style lines (timestamp in ms, input_length, output_length, hash_ids,
    session_id) in arrival order: what AIPerf's analyze-trace reads, at the trace's block size."""
    return "".join(json.dumps({"timestamp": round(r.timestamp_s * 1000, 3), "input_length": r.prompt_tokens,
                               "output_length": r.output_tokens, "hash_ids": list(r.hash_ids),
                               "session_id": r.session}) + "\n" for r in trace.requests)
