"""The arm's label: the one rule that says whether an arm's measurements may be ranked.

The passport, the sweep notebook and the campaign analysis all ask `arm_label`; none decides
on its own, so the three can never disagree.
"""
from __future__ import annotations

from enum import Enum


class Label(str, Enum):
    ACCEPTED = "accepted"
    HOLD = "HOLD"
    NOT_COMPARABLE = "not comparable"
    DISCARDED = "discarded"
    ENGINE_DIED = "engine died"
    NOT_MEASURED = "not measured"
    NOT_GATED = "not gated"

    def __str__(self) -> str:
        return self.value

    @property
    def ranked(self) -> bool:
        return self is Label.ACCEPTED

    @property
    def reason(self) -> str:
        """Why an arm with this label is not ranked, in the words the verdict uses."""
        return {Label.ACCEPTED: "accepted", Label.HOLD: "canaries HOLD",
                Label.NOT_COMPARABLE: "protocol differs",
                Label.DISCARDED: "every point discarded by the preregistered rules",
                Label.ENGINE_DIED: "the engine died", Label.NOT_MEASURED: "the load sweep did not run",
                Label.NOT_GATED: "measured without the canaries (stages without canaries)"}[self]


def arm_label(canary_verdict: str | None, points_discarded: list[bool] | None, *, engine_died: bool = False,
              comparable: bool = True) -> Label:
    """Decide an arm's label.

    canary_verdict: "PASS", "HOLD", or None when the canaries never ran; points_discarded: per
    measured point, whether a preregistered rule discarded it (None when the sweep did not run);
    engine_died: the engine exited and the arm did not finish; comparable: the fairness check
    (a per-arm passport, written before any comparison, leaves it True).

    The first that applies wins: engine died, canaries failed, not measured, canaries never
    ran (measured but not gated: never ranked), not comparable, every point discarded, accepted.
    """
    if engine_died:
        return Label.ENGINE_DIED
    if canary_verdict is not None and canary_verdict != "PASS":
        return Label.HOLD
    if points_discarded is None:
        return Label.NOT_MEASURED
    if canary_verdict is None:
        return Label.NOT_GATED
    if not comparable:
        return Label.NOT_COMPARABLE
    if points_discarded and all(points_discarded):
        return Label.DISCARDED
    return Label.ACCEPTED
