"""What the search and the ladder share: the plan fixed before any probe, the budgets, and one
load decided with re-probes.

The plan is preregistered: its tolerance, request counts and budgets are fixed before the first
probe, so the stopping point cannot be chosen after seeing results. An undecided probe is
repeated with twice the requests, up to `max_requests`, because a load near the capacity needs
more evidence, not a guess; every probe and re-probe counts against the budgets, and the history
keeps every one of them.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from stackbook.capacity.verdict import ProbeVerdict

# probe(load, requests): run `requests` measured requests at `load` and judge them.
Probe = Callable[[float, int], ProbeVerdict]


@dataclass(frozen=True)
class SearchPlan:
    """Integer loads (concurrency) take an absolute tolerance in load units; real ones (rates) a
    relative one (0.1: the upper end within 10% of the lower)."""
    start: float = 1
    tolerance: float = 1
    integer: bool = True
    min_load: float = 1
    max_load: float = 1024
    requests: int = 200
    max_requests: int = 800
    on_undecided: Literal["reprobe", "stop"] = "reprobe"
    max_probes: int = 40
    max_wall_s: float = math.inf

    def __post_init__(self) -> None:
        if self.integer and (self.tolerance < 1 or self.tolerance != int(self.tolerance)):
            raise ValueError(f"integer loads need a whole tolerance of at least 1, not {self.tolerance}")
        if not self.integer and not self.tolerance > 0:
            raise ValueError(f"a relative tolerance must be positive, not {self.tolerance}")
        if not 0 < self.min_load <= self.start <= self.max_load:
            raise ValueError(f"need 0 < min_load {self.min_load} <= start {self.start} <= max_load {self.max_load}")
        if self.requests < 1 or self.max_requests < self.requests:
            raise ValueError(f"need 1 <= requests {self.requests} <= max_requests {self.max_requests}")

    def width(self, lower: float, upper: float) -> float:
        """The interval's width in the tolerance's terms: load units, or upper/lower - 1."""
        return upper - lower if self.integer else upper / lower - 1

    def resolved(self, lower: float | None, upper: float | None) -> bool:
        return lower is not None and upper is not None and self.width(lower, upper) <= self.tolerance + 1e-12

    def round(self, load: float) -> float:
        return float(math.floor(load)) if self.integer else load

    def midpoint(self, a: float, b: float) -> float | None:
        """A load strictly between a and b worth probing (arithmetic for integers, geometric for
        rates), or None where the gap is already finer than the loads or the tolerance."""
        if self.integer:
            m = self.round((a + b) / 2)
            return m if a < m < b else None
        if b / a - 1 <= self.tolerance / 2:
            return None
        return math.sqrt(a * b)


@dataclass
class Session:
    """Probes run so far, against the plan's budgets."""
    probe: Probe
    plan: SearchPlan
    history: list[ProbeVerdict] = field(default_factory=list)
    stop_reason: str | None = None

    @property
    def spent_s(self) -> float:
        return sum(v.duration_s for v in self.history)

    def budget_left(self) -> bool:
        if len(self.history) >= self.plan.max_probes:
            self.stop_reason = f"probe budget spent: {len(self.history)} of {self.plan.max_probes} probes"
            return False
        if self.spent_s >= self.plan.max_wall_s:
            self.stop_reason = f"time budget spent: {self.spent_s:.1f} s of {self.plan.max_wall_s:.1f} s"
            return False
        return True

    def decide(self, load: float) -> ProbeVerdict | None:
        """The load's verdict after re-probes; None when a budget ran out first (`stop_reason`
        says which). An undecided verdict comes back once re-probing is spent or not allowed."""
        n = self.plan.requests
        while True:
            if not self.budget_left():
                return None
            verdict = self.probe(load, n)
            self.history.append(verdict)
            if verdict.verdict != "undecided" or self.plan.on_undecided == "stop" or n >= self.plan.max_requests:
                return verdict
            n = min(2 * n, self.plan.max_requests)


@dataclass(frozen=True)
class CapacityInterval:
    """The answer: the highest load proven inside and the lowest proven outside (None where no
    probe proved one), never a bare number, with every probe that led to it."""
    lower: float | None
    upper: float | None
    resolved: bool              # both ends proven and within the tolerance
    stop_reason: str
    probes: tuple[ProbeVerdict, ...]
    undecided: tuple[float, ...] = ()   # loads between the ends no probe could decide

    def holds(self, truth: float) -> bool:
        """Whether a true capacity lies in [lower, upper): the lower end may be the capacity
        itself, the upper end is a load past it."""
        return (self.lower is None or self.lower <= truth) and (self.upper is None or truth < self.upper)

    @property
    def duration_s(self) -> float:
        return sum(v.duration_s for v in self.probes)

    @property
    def requests(self) -> int:
        return sum(v.requests for v in self.probes)
