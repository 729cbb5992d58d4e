"""How long a campaign would run, before it starts: each arm's sweep as arithmetic, at the speeds an
earlier run of the campaign measured. The earlier run is chosen for its host: one whose CPU had
the instruction sets this host has (an AVX2 host decodes bf16 many times slower than one with
AVX512_BF16), then one in the same precision, then the latest; the estimate says which it read."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from stackbook.config.campaign import Arm, Campaign
from stackbook.config.protocol import Protocol
from stackbook.engines.registry import ADAPTERS
from stackbook.evidence.files import read_json
from stackbook.evidence.rundir import OutputsRoot
from stackbook.host import isa_class, isa_flags
from stackbook.loadgen.load_point import Load
from stackbook.loadgen.phases import Phase
from stackbook.loadgen.records import read_records
from stackbook.locations import REPO_ROOT, symbolic
from stackbook.measure.metric_definitions import ttft_s

GiB = 2**30
LONG_CAMPAIGN_S = 4 * 3600  # a campaign estimated past this is warned about at check time
ASSUMED_RECORD_BYTES = 4096  # one requests.jsonl line, when no earlier run measured it
LOG_HEAD_BYTES = 256 * 1024  # an engine states its CPU features as it starts


@dataclass
class ArmEstimate:
    arm: str
    seconds: float
    requests: int
    basis: str
    overhead_s: float = 0.0        # sizing and canaries: the first slot's alone
    per_repetition_s: float = 0.0  # one repetition's sweep (and search) and engine start: every slot's
    rounds_before: int | None = None  # the rounds the earlier run read here ran (sequential stopping)

    def slot_seconds(self, first: bool) -> float:
        """One slot of the arm as planned: a repetition, and the first slot's stages before it."""
        return self.per_repetition_s + (self.overhead_s if first else 0.0)


def duration(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:,.0f} days"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def mean_speeds(recs) -> tuple[float, float]:
    """(mean TTFT s, mean TPOT s) of records that succeeded."""
    ttft = sum(ttft_s(r) for r in recs) / len(recs)
    tpot = sum((r.end_s - r.first_token_s) / max(1, (r.output_tokens_server or r.output_tokens_client) - 1)
               for r in recs) / len(recs)
    return ttft, tpot


@lru_cache(maxsize=64)
def record_speeds(path: str, mtime_ns: int, size: int) -> tuple[float, float, float, dict] | None:
    """(mean TTFT s, mean TPOT s, bytes per line, {concurrency: (TTFT s, TPOT s)}) of one
    requests.jsonl's measured requests that succeeded, over all and per closed-loop concurrency
    (a request's TTFT grows with the requests queued beside it); None when there are none. Keyed
    by the file's mtime and size, read once."""
    recs = [r for r in read_records(path) if r.ok and r.phase == Phase.MEASURE and r.first_token_s is not None]
    if not recs:
        return None
    by_level: dict[int, list] = {}
    for r in recs:
        if r.concurrency:
            by_level.setdefault(r.concurrency, []).append(r)
    with open(path, "rb") as f:
        lines = max(1, sum(1 for _ in f))
    return (*mean_speeds(recs), size / lines, {c: mean_speeds(rs) for c, rs in by_level.items()})


def run_isa(run, kinds: dict[str, str]) -> list[str] | None:
    """The ISA flags of the host an earlier run measured on: as its engine records say (the host
    measured at the engine's start), else as an engine's own log states its CPU features (runs
    recorded before the host's flags were); None when neither says."""
    for name, kind in kinds.items():
        arm = run.arm(name)
        flags = ((read_json(arm.engine_json, {}) or {}).get("host") or {}).get("isa_flags")
        if flags:
            return flags
        if kind in ADAPTERS and arm.engine_log.exists():
            with open(arm.engine_log, "rb") as f:
                stated = ADAPTERS[kind].cpu_flags_in_log(f.read(LOG_HEAD_BYTES).decode("utf-8", "replace"))
            if stated:
                return stated
    return None


def run_precision(run, arm: str) -> str | None:
    """The weights' precision an earlier run's arm served, from its passport."""
    return (((read_json(run.arm(arm).passport_json, {}) or {}).get("identity") or {}).get("formats")
            or {}).get("weights")


def startup_seconds(entry: dict) -> float:
    """What only an arm's first slot spends, from its manifest entry: sizing and canaries. The
    engine's start is every slot's (each repetition starts it anew), counted in slot_overhead."""
    notebooks = entry.get("notebooks") or {}
    return sum((notebooks.get(n) or {}).get("seconds") or 0 for n in ("10_sizing", "20_canaries"))


def slot_overhead(manifest: dict, arm: str) -> float | None:
    """An earlier run's seconds per slot of `arm` outside its sweep and first-slot stages: the
    engine's start and stop and the notebook's own, the mean over its slots. A slot runs from the
    end of the one before it in its round; None where the manifest does not place the arm's slots."""
    arms = manifest.get("arms") or {}
    first = startup_seconds(arms.get(arm) or {})
    spent = []
    for rnd in (manifest.get("repetitions") or {}).get("rounds") or []:
        began = rnd.get("started_unix")
        for name in rnd.get("order") or []:
            log = ((arms.get(name) or {}).get("repetition_log") or {}).get(str(rnd.get("round")))
            if not log or not log.get("finished_unix") or began is None:
                break
            if name == arm and log.get("sweep_seconds") is not None:
                spent.append(log["finished_unix"] - began - log["sweep_seconds"] - (first if rnd["round"] == 0 else 0))
            began = log["finished_unix"]
    return max(0.0, sum(spent) / len(spent)) if spent else None


def expected_rounds(plan: dict[str, ArmEstimate], least: int, most: int) -> int:
    """The rounds to count on: as many as the earlier runs read for the plan ran (the most of
    them), inside the protocol's minimum and maximum; the minimum where none is on record."""
    seen = [e.rounds_before for e in plan.values() if e.rounds_before]
    return min(most, max([least, *seen]))


def search_seconds(results: dict) -> float | None:
    """What an earlier run's capacity search took a repetition (its probes' seconds, the mean over
    its repetitions); None where it ran no search."""
    rounds = list((((results or {}).get("capacity") or {}).get("rounds") or {}).values())
    spent = [r["duration_s"] for r in rounds if r.get("duration_s")]
    return sum(spent) / len(spent) if spent else None


def measured_speeds(campaign: Campaign, runs_root: Path, flags: list[str] | None = None) -> dict[str, dict]:
    """Per arm name, what the earlier run of this campaign closest to this host measured (same host
    type, then same precision, then the latest): mean TTFT and TPOT (seconds), seconds outside the
    sweep (engine start, canaries), bytes per record, the run and how it compares with this one."""
    here = isa_class(isa_flags() if flags is None else flags)
    kinds = {arm.name: arm.engine.kind for arm in campaign.arms}
    best: dict[str, tuple[tuple, dict]] = {}
    runs = OutputsRoot(runs_root).runs(campaign.name)  # the latest first
    for age, run in enumerate(runs):
        mpath = run.manifest
        manifest = read_json(mpath, {}) or {}
        there = None
        for arm in campaign.arms:
            entry = (manifest.get("arms") or {}).get(arm.name) or {}
            requests = run.arm(arm.name).requests
            if entry.get("engine") != arm.engine.kind or not requests.exists():
                continue
            st = requests.stat()
            speeds = record_speeds(str(requests), st.st_mtime_ns, st.st_size)
            if speeds is None:
                continue
            there = there or isa_class(run_isa(run, kinds) or [])
            served = run_precision(run, arm.name)
            serves = campaign.protocol_for(arm).precision.weights
            rank = (there == here, served == serves, -age)
            if arm.name in best and best[arm.name][0] >= rank:
                continue
            best[arm.name] = (rank, {
                "ttft_s": speeds[0], "tpot_s": speeds[1], "record_bytes": speeds[2], "by_concurrency": speeds[3],
                "overhead_s": startup_seconds(entry),
                "slot_overhead_s": slot_overhead(manifest, arm.name) or entry.get("engine_ready_s") or 0.0,
                "rounds": (manifest.get("repetitions") or {}).get("ran"),
                "search_s": search_seconds(read_json(run.arm(arm.name).results, {})),
                "run": symbolic(mpath.parent.relative_to(REPO_ROOT) if mpath.is_relative_to(REPO_ROOT)
                                else mpath.parent),
                "host": host_words(there, here, served, serves)})
    return {name: found for name, (_, found) in best.items()}


def host_words(there: str, here: str, served: str | None, serves: str) -> str:
    """How the earlier run's host and precision compare with this run's, in a few words."""
    host = (f"an {there} host like this one" if there == here else
            f"an {there} host; this one is {here}, so expect other speeds" if there != "unknown" else
            "a host whose instruction sets it did not record")
    return host + ("" if served in (None, serves) else f"; in {served}, where this run serves {serves}")


def arm_estimate(arm: Arm, p: Protocol, measured: dict | None) -> ArmEstimate:
    """The arm's sweep as arithmetic: per level, its requests over its clients (a closed loop) or
    its rate (an open loop), each request TTFT + output tokens x TPOT, measured where an earlier
    run has them, else at the SLO's limits (what a passing arm could take)."""
    if "sweep" not in p.stages:
        overhead = (measured or {}).get("overhead_s", 0.0)
        return ArmEstimate(arm.name, overhead, 0, "no sweep", overhead_s=overhead)
    ttft = measured["ttft_s"] if measured else p.slo.ttft_ms / 1000
    tpot = measured["tpot_s"] if measured else p.slo.tpot_ms / 1000
    by_level = (measured or {}).get("by_concurrency") or {}
    seconds, requests = 0.0, 0
    for level in p.arrival.load_levels():
        load = Load.of(level)
        at_ttft, at_tpot = by_level.get(load.concurrency, (ttft, tpot))  # the same load's, where it ran
        per_request = at_ttft + p.workload.output_tokens.mean_tokens() * at_tpot * p.workload.turns()
        n = p.requests_at(level)
        requests += n * p.repetitions.most  # sequential stopping may run up to max
        span = load.expected_span_s(n, per_request, lambda: (p.arrival.schedule(level, n, 0) or [0.0])[-1])
        seconds += span * p.repetitions.most
    search = ""
    searched = (measured or {}).get("search_s")
    if p.capacity is not None and searched:  # as long as the earlier run's took, the budget's bound aside
        seconds += searched * p.repetitions.most
        search = (f"; the capacity search {searched:,.0f} s a repetition as it took there "
                  f"(its budget {p.capacity.max_wall_s:,.0f} s)")
    elif p.capacity is not None:  # its time budget, checked before each probe (the last may run past it)
        seconds += p.capacity.max_wall_s * p.repetitions.most
        search = (f"; the capacity search at most its budget of {p.capacity.max_wall_s:,.0f} s a repetition "
                  f"(and {p.capacity.max_probes} probes), plus one probe")
    restart = (measured or {}).get("slot_overhead_s") or 0.0  # each slot starts and stops its engine
    seconds += restart * p.repetitions.most
    per_repetition = seconds / p.repetitions.most
    if measured:
        where = f" ({measured['host']})" if measured.get("host") else ""
        return ArmEstimate(arm.name, seconds + measured["overhead_s"], requests,
                           f"TTFT {ttft * 1000:,.0f} ms and TPOT {tpot * 1000:,.1f} ms"
                           + (" (means over its loads; each load's own where it ran)" if by_level else "")
                           + f" as measured in {measured['run']}"
                           f"{where}, plus its sizing and canaries, {measured['overhead_s']:,.0f} s, and each "
                           f"slot's engine start and stop, {restart:,.0f} s{search}",
                           overhead_s=measured["overhead_s"], per_repetition_s=per_repetition,
                           rounds_before=measured.get("rounds"))
    return ArmEstimate(arm.name, seconds, requests, f"arithmetic at the SLO's TTFT {p.slo.ttft_ms:g} ms and TPOT "
                       f"{p.slo.tpot_ms:g} ms; no earlier run of this campaign; engine start and canaries not included"
                       f"{search}", per_repetition_s=per_repetition)


def campaign_plan(campaign: Campaign, arms: list[Arm], runs_root: Path) -> dict[str, ArmEstimate]:
    """Each arm's estimate as the check prints it: the plan a run revises as its slots finish."""
    measured = measured_speeds(campaign, runs_root)
    return {arm.name: arm_estimate(arm, campaign.protocol_for(arm), measured.get(arm.name)) for arm in arms}


def check_duration(campaign: Campaign, protocols: dict[str, Protocol], out, runs_root: Path,
                   free_bytes: float | None) -> None:
    """The estimate, its best case under sequential stopping, and the records' disk space, into
    the preflight's estimates, notes and warnings."""
    measured = measured_speeds(campaign, runs_root)
    out.estimates = [arm_estimate(arm, protocols[arm.name], measured.get(arm.name)) for arm in campaign.arms]
    plan = campaign.protocol.repetitions
    if plan.most > plan.min:  # the estimate is the worst case: say what stopping at the minimum takes
        fewest = plan.model_copy(update={"max": plan.min})
        least = sum(arm_estimate(arm, protocols[arm.name].model_copy(update={"repetitions": fewest}),
                                 measured.get(arm.name)).seconds for arm in campaign.arms)
        out.notes.append(f"repetitions: the estimate is the worst case, {plan.most} repetitions; about "
                         f"{duration(least)} if every comparison on {campaign.protocol.decision.primary} is decided "
                         f"after {plan.min}")
    if out.seconds > LONG_CAMPAIGN_S:
        per_point = campaign.protocol.requests_per_point
        out.warnings.append(f"protocol.requests_per_point: the campaign would run about {duration(out.seconds)} "
                            f"(warned past {duration(LONG_CAMPAIGN_S)}): {per_point:,} requests per point. Fix: lower "
                            "requests_per_point, repetitions or the number of load levels")
    record = max([m["record_bytes"] for m in measured.values()] or [ASSUMED_RECORD_BYTES])
    need = sum(e.requests for e in out.estimates) * record
    out.notes.append(f"records: about {need / GiB:,.2f} GiB at {record:,.0f} bytes a request"
                     + (f"; {free_bytes / GiB:,.1f} GiB free under outputs/" if free_bytes is not None else ""))
    if free_bytes is not None and need > free_bytes:
        out.warnings.append(f"protocol.requests_per_point: the records would need about {need / 2**30:,.1f} GiB but "
                            f"only {free_bytes / 2**30:,.1f} GiB is free under outputs/. Fix: lower "
                            f"requests_per_point, "
                            "or free disk space")
