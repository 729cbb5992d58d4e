"""The campaign's time to go, revised as it runs from this host's own figures.

The plan (config.estimate) reads an earlier run, often from another host. Once a slot has run
here, its seconds against the plan's are this host's own correction: an arm that has run keeps its
own ratio for its later slots, and the arms still to run take the ratios measured so far
(geometric mean), since a slower host is slower for every engine, if not alike. A ratio is taken
on the sweep alone where the slot's start-up (sizing, canaries) was timed apart:
start-up and sweep need not scale alike, and a plan made by arithmetic has no start-up at all."""
from __future__ import annotations

import math
from dataclasses import dataclass

from stackbook.config.estimate import ArmEstimate, duration

ANALYSIS_S = 15.0   # the campaign's analysis and report, after the last slot
NOT_RUN_S = 1.0     # a slot that ended faster was kept from an earlier attempt: no time of this host


@dataclass(frozen=True)
class SlotTime:
    """One slot that ran here: the arm, its repetition, its wall seconds and, of those, its
    start-up's (0 where none was timed: a later repetition, or a slot kept from before)."""
    arm: str
    repetition: int
    seconds: float
    startup_s: float = 0.0


@dataclass(frozen=True)
class Revision:
    """The time to go after a slot, with what it was scaled by."""
    after: str
    elapsed_s: float
    to_go_s: float
    basis: str

    @property
    def total_s(self) -> float:
        return self.elapsed_s + self.to_go_s

    def line(self) -> str:
        return (f"time to go: about {duration(self.to_go_s)} ({duration(self.total_s)} in all) after {self.after}; "
                f"{self.basis}")

    def record(self) -> dict:
        return {"after": self.after, "elapsed_s": round(self.elapsed_s, 1), "to_go_s": round(self.to_go_s, 1),
                "total_s": round(self.total_s, 1), "basis": self.basis}


def own_ratios(plan: dict[str, ArmEstimate], done: list[SlotTime]) -> dict[str, float]:
    """Each arm's latest slot that ran here, over the plan's seconds for it (its sweep over the
    plan's repetition, where the slot's start-up was timed apart)."""
    ratios: dict[str, float] = {}
    for slot in done:
        if slot.arm not in plan or slot.seconds < NOT_RUN_S:
            continue
        apart = slot.startup_s > 0 and plan[slot.arm].per_repetition_s > 0
        here = slot.seconds - slot.startup_s if apart else slot.seconds
        planned = plan[slot.arm].per_repetition_s if apart else plan[slot.arm].slot_seconds(slot.repetition == 0)
        if planned > 0 and here > 0:
            ratios[slot.arm] = here / planned
    return ratios


def startup_here(plan: ArmEstimate, done: list[SlotTime], host: float) -> float:
    """A first slot's start-up still to come: the plan's scaled by the host's ratio, or, where the
    plan has none (arithmetic, no earlier run), the mean of the start-ups timed here."""
    if plan.overhead_s > 0:
        return plan.overhead_s * host
    timed = [s.startup_s for s in done if s.startup_s > 0]
    return sum(timed) / len(timed) if timed else 0.0


def host_ratio(ratios: dict[str, float]) -> float:
    """The host's correction for arms not yet run: the geometric mean of the arms' own, 1 before any."""
    if not ratios:
        return 1.0
    return math.exp(sum(math.log(r) for r in ratios.values()) / len(ratios))


def revise(plan: dict[str, ArmEstimate], done: list[SlotTime], remaining: list[tuple[str, int]],
           elapsed_s: float, analysis_s: float = ANALYSIS_S) -> Revision:
    """The time to go: each remaining (arm, repetition) slot at the plan's seconds times the arm's
    own ratio where it ran here, else the host's."""
    ratios = own_ratios(plan, done)
    host = host_ratio(ratios)
    timed = any(s.startup_s > 0 for s in done)
    to_go = analysis_s
    for arm, rep in remaining:
        if arm not in plan:
            continue
        if timed:  # sweeps by their ratios, start-ups apart
            to_go += plan[arm].per_repetition_s * ratios.get(arm, host) + (
                startup_here(plan[arm], done, host) if rep == 0 else 0.0)
        else:
            to_go += plan[arm].slot_seconds(rep == 0) * ratios.get(arm, host)
    last = done[-1] if done else None
    after = f"{last.arm}, repetition {last.repetition + 1}" if last else "no slot"
    if ratios:
        own = ", ".join(f"{arm} {r:.2f}x" for arm, r in ratios.items())
        pending = sorted({arm for arm, _ in remaining} - set(ratios))
        basis = (f"this host against the plan: {own}" +
                 (f"; {', '.join(pending)} not run yet, scaled by {host:.2f}x" if pending else ""))
    else:
        basis = "the plan's own figures: nothing has run here yet"
    return Revision(after, elapsed_s, to_go, basis)
