"""A valid campaign checked against the model it serves and the host it runs on, before anything
starts: what the schema alone cannot know (the model's maximum context, this machine's memory,
whether the output directory can be written, how long the campaign would run).

Refusals stop `run` and `run --check`; warnings are printed and the run goes on. Each names the
campaign field and the fix."""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from stackbook import sizing
from stackbook.capacity.verdict import requests_to_prove
from stackbook.config.campaign import Arm, Campaign
from stackbook.config.estimate import LONG_CAMPAIGN_S, ArmEstimate, check_duration, duration  # noqa: F401
from stackbook.config.precision import precision_lines
from stackbook.config.protocol import Protocol
from stackbook.engines.spec import CapacityBasis
from stackbook.evidence.rundir import OUTPUTS
from stackbook.locations import REPO_ROOT, symbolic
from stackbook.measure.slo_bounds import requests_needed
from stackbook.model.artifacts import EMBEDDED_CATALOG_KEY, artifacts_for
from stackbook.model.geometry import geometry_for
from stackbook.sizing.hardware import accelerator

GiB = 2**30


@dataclass
class Preflight:
    refusals: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    estimates: list[ArmEstimate] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return sum(e.seconds for e in self.estimates)

    def report(self) -> list[str]:
        """The estimate as lines for the terminal."""
        lines = [f"estimated duration: {duration(self.seconds)} "
                 f"({sum(e.requests for e in self.estimates):,} requests)"]
        lines += [f"  arm {e.arm}: {duration(e.seconds)} for {e.requests:,} requests ({e.basis})"
                  for e in self.estimates]
        return lines + self.notes


def _where(campaign: Campaign, arm: Arm, key: str) -> str:
    """A protocol field as the user wrote it: the arm's override when it sets one, else the protocol's."""
    if key in arm.protocol_overrides:
        return f"arms[{campaign.arms.index(arm)}].protocol_overrides.{key}"
    return f"protocol.{key}"


def _field(campaign: Campaign, arm: Arm, dotted: str) -> str:
    """A field named from an arm's point of view (engine.x, protocol.x) as the user wrote it."""
    head, _, rest = dotted.partition(".")
    if head == "engine":
        return f"arms[{campaign.arms.index(arm)}].{dotted}"
    return _where(campaign, arm, rest) if head == "protocol" else dotted


def starts_engine(protocol: Protocol) -> bool:
    return bool({"canaries", "sweep"} & set(protocol.stages))


# --------------------------------------------------------------------------- the model

def model_geometry(campaign: Campaign):
    """The served model's geometry read from its files (the catalog's for a catalog model, or an
    embedded model not yet set up); None with the reason when there is nothing to read."""
    spec = campaign.model
    if spec.source == "remote":
        return None, "a hosted model: its maximum context is the provider's"
    if spec.source == "catalog":
        return geometry_for(spec.catalog), f"the model catalog ({spec.catalog})"
    try:
        art = artifacts_for(spec)
    except FileNotFoundError:
        return geometry_for(EMBEDDED_CATALOG_KEY), f"the model catalog ({EMBEDDED_CATALOG_KEY}, the embedded model)"
    if art.hf_dir and (art.hf_dir / "config.json").exists():
        return geometry_for(art.hf_dir), symbolic(art.hf_dir / "config.json")
    if art.gguf and art.gguf.exists():
        return geometry_for(art.gguf), symbolic(art.gguf)
    return None, "no config.json or GGUF to read"


def check_context(campaign: Campaign, protocols: dict[str, Protocol], g, source: str, out: Preflight) -> None:
    if g is None or not g.max_context:
        return
    for arm in campaign.arms:
        context = protocols[arm.name].context_length
        if context > g.max_context:
            out.refusals.append(
                f"{_where(campaign, arm, 'context_length')}: {context:,} tokens exceeds the model's maximum "
                f"position embeddings, {g.max_context:,} (from {source}); the engine would refuse it or truncate. "
                f"Fix: lower context_length to at most {g.max_context}")
            return


# --------------------------------------------------------------------------- the host

def engine_memory(campaign: Campaign, arm: Arm, protocol: Protocol, g) -> tuple[float, float, list[str]] | None:
    """(weights bytes, cache pool bytes, the fields that size the pool) of the arm's engine, where
    the campaign fixes the pool (the kind's own setting, or hardware.pool_gib); else None."""
    spec = arm.engine
    pool, fields = spec.cache_pool_bytes(), [_field(campaign, arm, f) for f in spec.pool_set_by]
    if pool is None and g is not None and spec.pool_set_by:
        basis = CapacityBasis(geometry=g, protocol=protocol, device_memory_bytes=0, activations_bytes=0,
                              artifact_bytes=campaign.model.artifact_bytes, pool_bytes=None)
        try:
            mib = spec.predicted_capacity(basis).get("kv_cache_mib")
        except (ValueError, ZeroDivisionError):
            mib = None
        pool = mib * 2**20 if mib else None
    if pool is None and campaign.hardware.pool_gib:
        pool, fields = campaign.hardware.pool_gib * GiB, ["hardware.pool_gib"]
    if pool is None:
        return None
    weights = 0.0
    if g is not None and (g.num_parameters or campaign.model.artifact_bytes):
        weights = sizing.weight_bytes(g.num_parameters or 0, protocol.precision.weights, campaign.model.artifact_bytes)
    return weights, pool, fields


def memory_limit(campaign: Campaign) -> tuple[float, float | None, str]:
    """(total bytes, available now or None, what it is): this host's memory, or the accelerator's
    when the campaign sizes for one."""
    if campaign.hardware.accelerator == "this-cpu":
        import psutil
        vm = psutil.virtual_memory()
        return vm.total, vm.available, "this host's memory"
    hw = accelerator(campaign.hardware.accelerator)
    return hw.usable_bytes or hw.memory_bytes, None, f"the {hw.name}'s memory (hardware.accelerator)"


def check_memory(campaign: Campaign, protocols: dict[str, Protocol], g, out: Preflight,
                 limit: tuple[float, float | None, str]) -> None:
    total, available, what = limit
    for arm in campaign.arms:
        if not (arm.engine.serves_local_weights and starts_engine(protocols[arm.name])):
            continue
        held = engine_memory(campaign, arm, protocols[arm.name], g)
        if held is None:
            continue
        weights, pool, fields = held
        need = weights + pool
        said = (f"{fields[0]}: the engine of arm {arm.name} would hold {need / GiB:,.1f} GiB (weights "
                f"{weights / GiB:,.1f} GiB + a cache pool of {pool / GiB:,.1f} GiB, set by {' and '.join(fields)})")
        room = max(0.0, (total - weights) / GiB)
        if need > total:
            out.refusals.append(f"{said} but {what} is {total / GiB:,.1f} GiB. Fix: lower {' or '.join(fields)} so "
                                f"the pool stays under {room:,.1f} GiB")
        elif available is not None and need > available:
            out.warnings.append(f"{said}; {what} has {available / GiB:,.1f} GiB free now (of {total / GiB:,.1f}): "
                                f"the engine may swap or be killed. Fix: lower {' or '.join(fields)}, or free memory")


def output_problem(path: str | os.PathLike) -> str | None:
    """Why a run could not write under `path` (the nearest directory that exists is tried with a
    real file, so a read-only mount is caught even for root), or None."""
    p = Path(path)
    if not p.is_absolute():
        p = REPO_ROOT / p
    while not p.exists():
        p = p.parent
    if not p.is_dir():
        return f"{symbolic(p)} is a file where the run directory should go; move it or give another --run-id"
    try:
        with tempfile.TemporaryFile(dir=p):
            pass
    except OSError as err:
        return (f"{symbolic(p)} cannot be written ({err.strerror or err}), so the run would keep no records. "
                "Fix: make outputs/ writable (check its mount), or run from a checkout that can write it")
    return None


def load_refusals(campaign: Campaign) -> list[str]:
    """Arms whose sweep points cannot hold their load under the load rule (measure.validity): such
    a campaign is refused before any engine starts, not discarded point by point after the run.
    (A committed run made under an older rule still reads: this is a check on running, not on
    the schema.)"""
    out = []
    for arm in campaign.arms:
        p = campaign.protocol_for(arm)
        why = p.arrival.load_refusal(p.requests_per_point) if "sweep" in p.stages else None
        if why and f"{_where(campaign, arm, 'requests_per_point')}: {why}" not in out:
            out.append(f"{_where(campaign, arm, 'requests_per_point')}: {why}")
    return out


def check_load(campaign: Campaign, protocols: dict[str, Protocol], out: Preflight) -> None:
    """Refuse loads the measured requests cannot hold; note those they hold only narrowly."""
    out.refusals += load_refusals(campaign)
    for arm in campaign.arms:
        p = protocols[arm.name]
        if "sweep" not in p.stages:
            continue
        for line in p.arrival.narrow_loads(p.requests_per_point):
            note = f"{_where(campaign, arm, 'requests_per_point')}: {line}"
            if note not in out.notes:
                out.notes.append(note)


def check_slo_sample(campaign: Campaign, protocols: dict[str, Protocol], out: Preflight) -> None:
    """Say before the run whether the requests measured at a load can prove the SLO's attainment
    at all: even with every one inside the bounds, 64 requests cannot prove 99% at 95% (299 can),
    and the capacity inside the SLO then stays undecided."""
    for arm in campaign.arms:
        p = protocols[arm.name]
        if "sweep" not in p.stages:
            continue
        per_point = min(p.arrival.measured_at(level, p) for level in p.arrival.load_levels())
        n = per_point * p.workload.turns() * p.repetitions.min
        where = f"{_where(campaign, arm, 'slo')}.attainment {p.slo.attainment:g}"
        if p.slo.attainment >= 1:
            note = (f"{where}: no sample proves that every request meets the SLO; state a share below 1 "
                    "(e.g. 0.99) for the capacity inside it to be decided")
        else:
            needed = requests_needed(p.slo.attainment, p.decision.confidence)  # every one inside the bounds
            if n >= needed:
                continue
            note = (f"{where}: {n:,} measured requests at a load ({per_point} per point x "
                    f"{p.repetitions.min} repetition(s)) cannot prove it at {p.decision.confidence:.0%} confidence "
                    f"even if every one meets the SLO; {needed:,} can, so the capacity inside the SLO will stay "
                    "undecided")
        if note not in out.notes:
            out.notes.append(note)
    for arm in campaign.arms:
        p = protocols[arm.name]
        if p.capacity is not None:
            note = capacity_sample_note(p, _where(campaign, arm, "capacity"))
            if note not in out.notes:
                out.notes.append(note)


def capacity_sample_note(p: Protocol, where: str) -> str:
    """What a probe's sample can prove: the requests a load needs, all inside the SLO, to be judged
    inside (the Wilson rule of capacity.verdict), against the plan's first probe and its ceiling."""
    need, c = requests_to_prove(p.slo.attainment), p.capacity
    first = (f"a first probe of {c.requests} can prove it" if c.requests >= need else
             f"a first probe of {c.requests} cannot, so every load judged inside is probed again with more")
    return (f"{where}: a load is proven inside slo.attainment {p.slo.attainment:g} when at least {need} of its "
            f"requests, every one inside the SLO, say so at 95%; {first} (up to {c.max_requests})")


def free_space(path: str | os.PathLike) -> float | None:
    p = Path(path) if Path(path).is_absolute() else REPO_ROOT / path
    while not p.exists():
        p = p.parent
    try:
        st = os.statvfs(p)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


# --------------------------------------------------------------------------- all together

def preflight(campaign: Campaign, run_path: str | os.PathLike, *, check_host: bool = True,
              runs_root: Path | None = None, limit: tuple[float, float | None, str] | None = None) -> Preflight:
    """Every check of the campaign against its model and (with check_host) this host; run_path
    is where the run would write. `limit` replaces the measured memory (tests)."""
    out = Preflight()
    protocols = {arm.name: campaign.protocol_for(arm) for arm in campaign.arms}
    try:
        g, source = model_geometry(campaign)
    except (OSError, ValueError, KeyError) as err:  # a model file the geometry reader cannot parse
        g, source = None, ""
        out.notes.append(f"model: not checked against the campaign ({symbolic(str(err))[:300]})")
    check_context(campaign, protocols, g, source, out)
    warnings, notes = precision_lines(campaign.protocol.precision, campaign.arms)
    out.warnings += warnings
    out.notes += notes
    check_load(campaign, protocols, out)
    check_slo_sample(campaign, protocols, out)
    if check_host:
        check_memory(campaign, protocols, g, out, limit or memory_limit(campaign))
        from stackbook.routing.preflight import routing_checks  # each router started once, alone
        refusals, notes = routing_checks(campaign, starts_engine)
        out.refusals += refusals
        out.notes += notes
    problem = output_problem(run_path)
    if problem:
        out.refusals.append(f"output directory: {problem}")
    check_duration(campaign, protocols, out, runs_root or (REPO_ROOT / OUTPUTS), None if problem
                   else free_space(run_path))
    return out
