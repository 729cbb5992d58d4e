"""What measuring reads of an arm being measured (steps.session.ArmSession): named here so that
the sweep and the capacity probe, below the notebooks' steps, state what they rely on instead of
reaching into the session by duck type."""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from stackbook.config.campaign import Arm, Campaign
    from stackbook.config.protocol import Protocol as Measured
    from stackbook.engines import EngineAdapter
    from stackbook.evidence.rundir import ArmDir
    from stackbook.loadgen.drivers import Target
    from stackbook.routing.routed import RoutedDeployment


class LiveArm(Protocol):
    """An arm with its engine up: its campaign, protocol and directory, the engine's adapter and
    record (engine.json), and the router where replicas serve it."""
    campaign: Campaign
    arm: Arm
    protocol: Measured
    arm_dir: ArmDir
    adapter: EngineAdapter
    engine: dict
    routing: RoutedDeployment | None

    def target(self) -> Target:
        """Where requests go, with the protocol's request fields."""
        ...

    def engine_alive(self) -> bool:
        """Whether the engine (or the router and a replica) still runs."""
        ...

    def harness_ceiling(self) -> dict | None:
        """The harness ceiling measured at campaign start, if any."""
        ...
