"""Repetitions interleaved across arms: round r runs every arm once, in the round's order (A B,
then B A, ...), so slow drift on a shared machine lands on every arm alike. From `min` rounds on,
another round runs only while a comparison on the preregistered primary figure is undecided, up
to `max` (sequential stopping); the manifest records every round's order and why the rounds
stopped, so the order can be replayed."""
from __future__ import annotations

import time
from typing import Callable

from stackbook.arm_run import slot_steps
from stackbook.config.estimate import expected_rounds, startup_seconds
from stackbook.config.estimate_revision import SlotTime, revise


def decided_after(run_dir) -> tuple[bool, str]:
    """Whether every comparison on the primary figure is decided on the run's records so far."""
    from stackbook.analysis.comparison import analyse_run
    from stackbook.analysis.verdict import primary_decided
    from stackbook.analysis.decision import PairDecision

    result = analyse_run(run_dir)
    found = [PairDecision(**d) for d in result.decisions]
    primary = result.decision_rule.get("primary", "output_throughput")
    undecided = [d for d in found if d.metric == primary and d.decision == "undecided"]
    if not found:
        return True, "no pair of ranked, comparable arms: nothing to decide"
    if primary_decided(found, primary):
        return True, f"every comparison on {primary} decided"
    return False, f"{len(undecided)} comparison(s) on {primary} undecided"


def report_time_to_go(run, done: list[SlotTime], remaining: list[tuple[str, int]], elapsed_s: float) -> None:
    """The revised time to go after a slot: logged, on the progress bar and in the manifest, so an
    estimate can be held against the run's wall time afterwards."""
    plan = getattr(run, "plan", None)
    if not plan or not remaining:
        return
    revision = revise(plan, done, remaining, elapsed_s)
    run.manifest.data.setdefault("time_estimates", []).append(revision.record())
    run.manifest.save()
    run.log(revision.line())
    run.steps.set_description(f"{run.campaign.name} (about {revision.to_go_s / 60:.0f} min to go)")


def run_rounds(run, arms: list, run_slot: Callable[[object, list[int]], None],
               decided: Callable[[object], tuple[bool, str]] = decided_after) -> None:
    """Run every arm's repetitions round by round, stopping as the protocol preregistered."""
    plan = run.campaign.protocol.repetitions
    names = [a.name for a in arms]
    by_name = {a.name: a for a in arms}
    record = run.manifest.data.setdefault("repetitions", {})
    record.update(min=plan.min, max=plan.most, order=plan.order, order_seed=plan.order_seed)
    rounds = record.setdefault("rounds", [])
    began, done = time.monotonic(), []
    # The rounds the estimates count on: as many as the earlier runs the plan read ran.
    counted = expected_rounds(run.plan, plan.min, plan.most) if getattr(run, "plan", None) else plan.min
    if getattr(run, "plan", None) and "time_estimates" not in run.manifest.data:  # the plan, before any slot
        first = revise(run.plan, [], [(n, q) for q in range(counted) for n in names], 0.0)
        arms_planned = {n: {"overhead_s": round(e.overhead_s, 1), "per_repetition_s": round(e.per_repetition_s, 1),
                            "rounds_before": e.rounds_before} for n, e in run.plan.items()}
        run.manifest.data["time_estimates"] = [first.record() | {"after": "the plan", "rounds_counted": counted,
                                                                 "arms": arms_planned}]
    for r in range(plan.most):
        if r >= plan.min:
            ok, why = decided(run.run_dir)
            if ok:
                record["stopped"] = f"after {r} repetitions: {why}"
                break
            run.log(f"repetition {r + 1} of at most {plan.most}: {why}")
            run.steps.total += len(names) * slot_steps(False)  # a round beyond the minimum: its slots count too
            run.steps.refresh()
        order = plan.round_order(r, names)
        entry = next((x for x in rounds if x["round"] == r), None)
        if entry is None:
            entry = {"round": r, "order": order, "started_unix": time.time()}
            rounds.append(entry)
        run.manifest.save()
        for i, name in enumerate(order):
            t0 = time.monotonic()
            run_slot(by_name[name], [r])
            entry_of_arm = (run.manifest.data.get("arms") or {}).get(name) or {}
            done.append(SlotTime(name, r, time.monotonic() - t0, startup_seconds(entry_of_arm) if r == 0 else 0.0))
            later = [(n, r) for n in order[i + 1 :]] + [
                (n, q) for q in range(r + 1, max(counted, r + 1)) for n in names
            ]
            report_time_to_go(run, done, later, time.monotonic() - began)
        entry["finished_unix"] = time.time()
        record["ran"] = r + 1
        run.manifest.save()
    else:
        record["stopped"] = (f"after {plan.most} repetitions: " +
                             ("fixed by the protocol (min = max)" if plan.min == plan.most
                              else "repetitions.max reached"))
    run.manifest.save()
