"""Sending one load point to an arm's engine, the one way the sweep and the capacity probe both
send: the engine checked, the point's prompts and plan built, the prefix cache prepared, the
prompts salted, the point sent (its records written as they complete), the engine checked again.
What the sweep reads of the engine around the sending goes in as a context (`around`)."""
from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

from stackbook.gate.sentinels import mix_sentinels
from stackbook.loadgen.client_processes import ClientCost, send_point
from stackbook.loadgen.drivers import Target
from stackbook.loadgen.load_point import LoadPoint
from stackbook.loadgen.phases import Phase
from stackbook.loadgen.plans import PointPlan
from stackbook.loadgen.prompt_salt import salt_point
from stackbook.loadgen.records import NOT_ANSWERED, RecordWriter
from stackbook.loadgen.sent import SentWriter
from stackbook.loadgen.workload import recorded_prompts, synthetic_prompts
from stackbook.measure.arm_session import LiveArm
from stackbook.measure.cache_split import salt_tokens
from stackbook.measure.prefix_cache import prepare_point


class EngineFailure(RuntimeError):
    """The engine died or stopped answering: the sweep stops, its records stay for --resume."""


def not_answered(records) -> bool:
    """Every measured request failed as a gone or frozen engine fails them (or, where the clients
    stopped before any measured request, every warm-up did): the point says nothing of the
    engine's speed, and a resumed run measures it again."""
    measured = [r for r in records if r.phase == Phase.MEASURE] or [r for r in records if r.phase == Phase.WARMUP]
    return bool(measured) and all(r.error_class in NOT_ANSWERED for r in measured)


def check_engine(session: LiveArm, name: str, records: list | None = None) -> None:
    if not session.engine_alive():
        raise EngineFailure(f"the engine exited before point {name}")
    if records and not_answered(records):
        failed = next(r.error_class for r in records if r.phase in (Phase.MEASURE, Phase.WARMUP))
        raise EngineFailure(f"every request of point {name} failed ({failed}): the engine is not answering")


def cooldown_requests(protocol, level: dict) -> int:
    return protocol.arrival.cooldown_requests(level, protocol)


def point_requests(protocol, level: dict, n: int, seed: int, tokenizer, sentinels: list
                   ) -> tuple[list, PointPlan]:
    """One point's prompts, built before its readings start, in sending order, and the plan they
    are sent by (its arrival pattern's: deadlines or clients, with the cool-down). Where the
    pattern fixes the prompts' lengths (a trace) they are its own, without sentinels."""
    arrival, cooldown = protocol.arrival, cooldown_requests(protocol, level)
    lengths = arrival.prompt_lengths(level)
    prompt_seed = arrival.prompt_seed(level, seed)
    recorded = arrival.recorded_messages(level)
    if recorded is not None:  # a request log: its own messages, each reply at its recorded length
        prompts = recorded_prompts(recorded, [out for _, out in lengths], tokenizer)
    elif lengths is not None:
        prompts = synthetic_prompts(protocol.workload, tokenizer, len(lengths), seed=prompt_seed, lengths=lengths,
                                    blocks=arrival.prompt_blocks(level))
    else:
        prompts = mix_sentinels(synthetic_prompts(protocol.workload, tokenizer, n, seed=prompt_seed),
                                sentinels, protocol.warmup_requests, cooldown, protocol.canaries.sentinel_share)
    return prompts, arrival.point_plan(level, len(prompts), seed, cooldown)


def arm_target(session: LiveArm) -> Target:
    """Where the arm's requests go, each asking for its output length as the engine takes it."""
    target = session.target()
    target.length_for = session.adapter.output_length_fields
    return target


@dataclass
class SentPoint:
    """What sending one point gave: its records, what the client spent, and what was done to the
    prefix cache before it (the flush, the priming, the salt)."""
    records: list
    cost: ClientCost
    cache: dict


@dataclass
class PointMeter:
    """Sends points to one arm's engine from this process (`processes` client processes), their
    records to `writer` (and their bodies to `sent_writer`) as they complete."""
    session: LiveArm
    run_id: str
    target: Target
    tokenizer: object
    writer: RecordWriter | None
    sent_writer: SentWriter | None = None
    progress: object = None  # a tqdm bar of requests, or None
    sentinels: list = field(default_factory=list)  # canary checks mixed into each point
    processes: int = 1
    engine_pid: int | None = None  # the engine's process, which client processes keep off its cores

    def send(self, point: LoadPoint, around: AbstractContextManager | None = None) -> SentPoint:
        """Send `point` (a new attempt, from its start); `around` is entered just before the first
        request and left after the last, the engine not yet checked."""
        session, protocol, target, tokenizer = self.session, self.session.protocol, self.target, self.tokenizer
        check_engine(session, point.name)
        prompts, plan = point_requests(protocol, point.load.level(), point.requests, protocol.seed_of(point.repetition),
                                       tokenizer, self.sentinels)
        routing = session.routing  # replicas behind a router (routing/): each flushed on its own
        cache = (routing.prepare_point(protocol.prefix_cache, target, protocol.workload, tokenizer) if routing
                 else prepare_point(protocol.prefix_cache, session.adapter, target, protocol.workload, tokenizer))
        prompts, salt = salt_point(protocol, self.run_id, session.arm.name, point.name, point.attempt, prompts,
                                   tokenizer)
        if salt:
            cache |= {"salt": salt, "salt_tokens": salt_tokens(salt, tokenizer)}
        with around or nullcontext():
            records, cost = send_point(plan, target, prompts, tokenizer, processes=self.processes,
                                       parts_dir=session.arm_dir.client_parts, writer=self.writer,
                                       sent_writer=self.sent_writer, base=point.record_fields(self.run_id,
                                                                                             session.arm.name),
                                       warmup=protocol.warmup_requests, progress=self.progress,
                                       alive=session.engine_alive, engine_pid=self.engine_pid)
        check_engine(session, point.name, records)
        return SentPoint(records, cost, cache)
