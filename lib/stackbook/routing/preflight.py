"""Before any engine starts (`stackbook run` and `run --check`): every router an arm names must be
installed and must start here with the arm's settings (it is started once, alone, in front of no
replica, and stopped); and how the replicas, the router and the client share this host's cores
is said. Whether each replica becomes healthy is known only once it starts: the runner refuses
the arm then, before anything is measured."""
from __future__ import annotations

import functools
import os

from stackbook.engines.base import EngineStartError
from stackbook.routing.registry import router_class


def router_starts(arm) -> str | None:
    """Why the arm's router cannot start here, or None once it has started and been stopped."""
    kind = router_class(arm.router.kind)
    if not kind.runs_process:
        return None
    if not kind.is_installed():
        return kind.install_hint()
    return started_once(arm.router.kind, arm.router.model_dump_json(), arm.engine.host)


@functools.cache
def started_once(kind_name: str, spec_json: str, host: str) -> str | None:
    """One start per router settings, host and process: arms (and checks) that share them share its
    outcome."""
    kind = router_class(kind_name)
    router = kind(kind.spec_model.model_validate_json(spec_json), [], host)
    try:
        router.start()
        router.wait_ready()
    except (EngineStartError, OSError) as err:
        return str(err).splitlines()[0] + "".join(f"\n      {line}" for line in str(err).splitlines()[1:][-2:])
    finally:
        router.stop()
    return None


def core_note(i: int, arm, cores: int) -> str:
    threads = getattr(arm.engine, "threads", None)
    if threads is None:
        return (f"arms[{i}].replicas: {arm.replicas} replicas of {arm.engine.kind}; the router and the load "
                f"generator share this host's {cores} cores with them")
    used = arm.replicas * threads
    share = ("each replica's threads a core of their own" if used <= cores
             else f"{used - cores} more threads than cores, so the replicas contend for them")
    router = "the router and the load generator" if router_class(arm.router.kind).runs_process else "the load generator"
    return (f"arms[{i}].replicas: {arm.replicas} replicas x {threads} thread(s) = {used} of this host's {cores} "
            f"cores ({share}); {router} run in the gaps, their CPU seconds read per point beside the replicas'")


def routing_checks(campaign, starts_engine) -> tuple[list[str], list[str]]:
    """(refusals, notes) for every arm with replicas whose protocol starts an engine."""
    refusals, notes = [], []
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    for i, arm in enumerate(campaign.arms):
        if arm.router is None or not starts_engine(campaign.protocol_for(arm)):
            continue
        why = router_starts(arm)
        if why:
            refusals.append(f"arms[{i}].router: router {arm.router.kind!r} cannot start here: {why}")
        notes.append(core_note(i, arm, cores))
    return refusals, notes
