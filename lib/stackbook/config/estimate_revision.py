"""The campaign's time to go, revised as it runs from this host's own figures.

The plan (config.estimate) reads an earlier run, often from another host. Once a slot has run
here, its seconds against the plan's are this host's own correction: an arm that has run keeps its
own ratio for its later slots, and the arms still to run take the ratios measured so far
(geometric mean), since a slower host is slower for every engine, if not alike."""
from __future__ import annotations

import math
from dataclasses import dataclass

from stackbook.config.estimate import ArmEstimate, duration

ANALYSIS_S = 15.0   # the campaign's analysis and report, after the last slot
NOT_RUN_S = 1.0     # a slot that ended faster was kept from an earlier attempt: no time of this host


@dataclass(frozen=True)
class SlotTime:
    """One slot that ran here: the arm, its repetition and its wall seconds."""
    arm: str
    repetition: int
    seconds: float


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
    """Each arm's latest slot that ran here, over the plan's seconds for it."""
    ratios: dict[str, float] = {}
    for slot in done:
        planned = plan[slot.arm].slot_seconds(slot.repetition == 0) if slot.arm in plan else 0.0
        if planned > 0 and slot.seconds >= NOT_RUN_S:
            ratios[slot.arm] = slot.seconds / planned
    return ratios


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
    to_go = analysis_s + sum(plan[arm].slot_seconds(rep == 0) * ratios.get(arm, host)
                             for arm, rep in remaining if arm in plan)
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
