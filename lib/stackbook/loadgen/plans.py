"""What one sweep point sends, as its arrival pattern plans it: an open loop with each prompt's
deadline, a closed loop with its clients, or a recorded trace replayed on its own clock.

The sweep, the client processes and the load-validity rules (by the rule each plan names) act on
the plan's type, so a new
arrival pattern says which plan it makes and nothing else needs to know its keys.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar, Union


def concurrency_shares(concurrency: int, processes: int) -> list[int]:
    """A closed loop's concurrency split as evenly as it goes (the first processes take one more)."""
    base, extra = divmod(concurrency, processes)
    return [base + (k < extra) for k in range(processes)]


@dataclass(frozen=True)
class OpenPlan:
    """Prompts sent on a clock whatever the replies do: `schedule` holds each one's deadline
    (seconds from the point's start); `cooldown` prompts follow the measured ones."""
    schedule: list[float]
    cooldown: int = 0
    judged_against_harness_ceiling: ClassVar[bool] = True  # a rate the client itself must hold
    validity_rule: ClassVar[str] = "open loop"  # measure.validity judges its points by this rule

    def client_weights(self, processes: int) -> list[int]:
        """How many of the point's senders each client process runs: one deadline stream each."""
        return [1] * processes

    def share(self, positions: list[int], clients: int) -> OpenPlan:
        """The part of the plan one client process sends: the deadlines of its prompts."""
        return dataclasses.replace(self, schedule=[self.schedule[i] for i in positions])



@dataclass(frozen=True)
class TracePlan(OpenPlan):
    """A recorded trace replayed: its own timestamps as deadlines, and no cool-down."""


@dataclass(frozen=True)
class SessionPlan(TracePlan):
    """A recorded trace replayed closed loop by session: a session's first step leaves at its
    recorded time; each later step waits for the reply to the step before it, then `think_s`
    (None: after the recorded idle time in `gaps` where the trace records it, else at its own
    recorded time, never sooner). `sessions` names each prompt's session. An agent trace's
    subagents are sessions too: a session whose first step has `spawned_by` (session, turn) starts
    once that step's reply has ended; a step with `waits_for` leaves only once each of those
    sessions' last reply has."""
    sessions: tuple[str, ...] = ()
    think_s: float | None = None
    gaps: tuple[float | None, ...] = ()
    spawned_by: tuple[tuple[str, int] | None, ...] = ()
    waits_for: tuple[tuple[str, ...], ...] = ()
    validity_rule: ClassVar[str] = "session replay"

    def client_weights(self, processes: int) -> list[int]:
        """One process: a session's steps wait on each other's replies, so they cannot be dealt apart."""
        return [1]

    def share(self, positions: list[int], clients: int) -> SessionPlan:
        def pick(values: tuple) -> tuple:
            return tuple(values[i] for i in positions) if values else ()
        return dataclasses.replace(
            self,
            schedule=[self.schedule[i] for i in positions],
            sessions=pick(self.sessions),
            gaps=pick(self.gaps),
            spawned_by=pick(self.spawned_by),
            waits_for=pick(self.waits_for),
        )


@dataclass(frozen=True)
class ClosedPlan:
    """`concurrency` clients, each sending its next prompt when its previous reply ends;
    `cooldown` prompts follow the measured ones so the last measured still run under full load."""
    concurrency: int
    cooldown: int = 0
    judged_against_harness_ceiling: ClassVar[bool] = False  # no clock: replies pace the sends
    validity_rule: ClassVar[str] = "closed loop"

    def client_weights(self, processes: int) -> list[int]:
        """The clients per process (never more processes than clients: one without would send nothing)."""
        return concurrency_shares(self.concurrency, min(processes, self.concurrency))

    def share(self, positions: list[int], clients: int) -> ClosedPlan:
        return dataclasses.replace(self, concurrency=clients)



PointPlan = Union[OpenPlan, ClosedPlan]  # TracePlan and SessionPlan are OpenPlans
