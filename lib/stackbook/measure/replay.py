"""Replay: re-send the exact bodies an arm sent, on the schedule they were sent (each body at its
recorded offset from its point's start), to a running endpoint, and record the replay as a run of
its own under the same campaign, beside the original.

Every body goes out as recorded, a later turn of a conversation included (it carries the original
replies in its history), so the replay's body digests equal the original's.
"""
from __future__ import annotations

import asyncio
import dataclasses
import shutil
import time
from typing import Any

from pydantic import BaseModel

from stackbook.evidence.files import write_model
from stackbook.evidence.rundir import RunDir
from stackbook.loadgen.drivers import (
    MAX_SLEEP_S,
    Target,
    collector_paused,
    keep,
    run_sync,
    stream_chat,
)
from stackbook.loadgen.http_client import StreamClient
from stackbook.loadgen.records import RecordWriter, RequestRecord, read_records
from stackbook.loadgen.sent import SentRequest, SentWriter, point_digests, read_sent
from stackbook.loadgen.sent_content import is_redacted
from stackbook.loadgen.workload import ApproximateTokenizer, PromptSpec
from stackbook.measure.metric_definitions import schedule_lag_s
from stackbook.stats import sample_percentile

# Body fields request_body() writes itself; everything else is passed through as recorded.
_BUILT = ("model", "messages", "stream", "stream_options")


def target_for(body: dict, base_url: str, headers: dict, timeout_s: float, on_send=None,
               route: dict | None = None) -> tuple[Target, PromptSpec]:
    """A Target and prompt that make request_body() rebuild this exact body, sent on the
    endpoint's route (its chat path and CA bundle; the body already names its length field)."""
    if is_redacted(body):
        raise ValueError("this run kept a private request log's prompts as digests, not as text: replay the log "
                         "itself (arrival: {kind: trace}), or run it with keep_content: true to keep bodies that "
                         "can be re-sent")
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") if fmt.get("type") == "json_schema" else None
    skip = _BUILT + (("max_tokens", "response_format") if schema is not None else ())
    sampling = {k: v for k, v in body.items() if k not in skip}
    lengths = {"max_tokens": body.get("max_tokens")} if schema is not None else {}
    route = route or {}
    target = Target(base_url, body.get("model", ""), sampling, lengths, headers, timeout_s, on_send=on_send,
                    chat_path=route.get("chat_path") or "/v1/chat/completions", ca_bundle=route.get("ca_bundle"))
    prompt = PromptSpec(0, body.get("messages", []), 0, output_tokens=body.get("max_tokens") if schema else None,
                        schema=schema)
    return target, prompt


async def replay_point(base_url: str, sent: list[SentRequest], *, base: dict, tokens_of: dict, headers: dict,
                       timeout_s: float, writer: RecordWriter | None, on_send=None,
                       route: dict | None = None) -> list[RequestRecord]:
    """Send each recorded body at its recorded offset from the point's start (absolute deadlines,
    as the open loop does), whatever the replies are doing."""
    tokenizer = ApproximateTokenizer()
    out: list[RequestRecord] = []
    items = sorted(sent, key=lambda s: s.sent_s)
    async with StreamClient(base_url, ca_bundle=(route or {}).get("ca_bundle")) as client:
        t0 = time.perf_counter()

        async def one(s: SentRequest) -> None:
            target, prompt = target_for(s.body, base_url, headers, timeout_s, on_send, route)
            prompt = dataclasses.replace(prompt, index=s.request_index,
                                         prompt_tokens_client=tokens_of.get((s.request_index, s.turn), 0))
            rec = await stream_chat(client, target, prompt, tokenizer, base=dict(base, phase=s.phase), t0=t0,
                                    scheduled_s=s.sent_s, output_tokens=prompt.output_tokens, turn=s.turn)
            keep(rec, out, writer, None, lambda: True)

        tasks = []
        for s in items:
            while (delay := s.sent_s - (time.perf_counter() - t0)) > 0:
                await asyncio.sleep(min(delay, MAX_SLEEP_S))
            tasks.append(asyncio.create_task(one(s)))
        await asyncio.gather(*tasks)
    return out


class ReplayedPoint(BaseModel):
    requests: int
    errors: int
    bodies_sha256: str
    original_bodies_sha256: str
    identical_bodies: bool
    send_offset_ms_p99: float  # how late the replay sent behind the recorded offsets


class Replay(BaseModel):
    """replay.json: what was replayed, from where, to where, and whether the bodies matched."""
    replay_of: str
    arm: str
    endpoint: str
    started_unix: float
    points: dict[str, ReplayedPoint]


def replay_arm(run_dir, arm: str, *, points: list[str] | None = None, endpoint: str | None = None,
               headers: dict | None = None, run_id: str | None = None, timeout_s: float = 120.0,
               start_engine=None, route: dict | None = None) -> RunDir:
    """Replay an arm's recorded bodies into a new run directory of the same campaign (run id
    `replay-<original>-<UTC time>` unless given); returns it. Without an endpoint,
    `start_engine(replay_run)` must start the arm's engine and return (base_url, headers, stop)."""
    source = run_dir if isinstance(run_dir, RunDir) else RunDir.existing(run_dir)
    original = source.arm(arm)
    sent = read_sent(original.requests_sent, latest_attempt=True)
    if not sent:
        raise FileNotFoundError(f"{original.requests_sent}: no recorded bodies for arm {arm!r}; only runs made "
                                "since bodies are kept (requests_sent.jsonl.gz) can be replayed")
    known = sorted({s.point for s in sent})
    chosen = points or known
    missing = [p for p in chosen if p not in known]
    if missing:
        raise ValueError(f"--point {', '.join(missing)}: not recorded for arm {arm!r}; recorded points: "
                         f"{', '.join(known)}")
    campaign_dir = source.path.parent
    replay = RunDir(campaign_dir / (run_id or f"replay-{source.name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"))
    if replay.path.exists():
        raise FileExistsError(f"{replay}: already exists; give another run id")
    replay.create()
    shutil.copyfile(source.campaign_resolved, replay.campaign_resolved)
    out_arm = replay.arm(arm).create()
    stop = None
    if endpoint is None:
        if start_engine is None:
            raise ValueError("give --endpoint URL, or let the arm's engine be started")
        endpoint, headers, stop = start_engine(replay)
    records = read_records(original.requests, latest_attempt=True)
    original_digests = point_digests(sent)
    started = time.time()
    try:
        with RecordWriter(out_arm.requests) as writer, SentWriter(out_arm.requests_sent) as sent_writer, \
                collector_paused():
            for point in chosen:
                mine = [r for r in records if r.point == point]
                base: dict[str, Any] = {"run_id": replay.name, "arm": arm, "point": point,
                                        "repetition": mine[0].repetition if mine else 0,
                                        "concurrency": mine[0].concurrency if mine else 0, "attempt": 0}
                tokens_of = {(r.request_index, r.turn): r.prompt_tokens_client for r in mine}
                run_sync(replay_point(endpoint, [s for s in sent if s.point == point], base=base,
                                      tokens_of=tokens_of, headers=headers or {}, timeout_s=timeout_s,
                                      writer=writer, on_send=sent_writer.write, route=route))
    finally:
        if stop is not None:
            stop()
    replayed_sent = read_sent(out_arm.requests_sent)
    digests = point_digests(replayed_sent)
    replayed = read_records(out_arm.requests)
    result = Replay(replay_of=str(source), arm=arm, endpoint=endpoint, started_unix=started, points={
        p: ReplayedPoint(
            requests=digests[p]["requests_sent"],
            errors=sum(1 for r in replayed if r.point == p and not r.ok),
            bodies_sha256=digests[p]["bodies_sha256"],
            original_bodies_sha256=original_digests[p]["bodies_sha256"],
            identical_bodies=digests[p]["bodies_sha256"] == original_digests[p]["bodies_sha256"],
            send_offset_ms_p99=round(1000 * (sample_percentile(
                [max(0.0, schedule_lag_s(s)) for s in replayed_sent if s.point == p], 99) or 0.0), 3))
        for p in chosen})
    write_model(replay.replay, result)
    return replay
