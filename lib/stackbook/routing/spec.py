"""The `router:` mapping every router kind shares.

This module imports nothing from config: config builds the arm's router union from the routing
registry, so the dependency runs one way only."""
from __future__ import annotations

from typing import get_args

from pydantic import BaseModel, ConfigDict, Field


class RouterSpec(BaseModel):
    """The `router:` mapping of an arm. Each kind's subclass adds its `kind` tag, the policies it
    offers (a Literal `policy`) and its own options."""
    model_config = ConfigDict(extra="forbid")

    startup_timeout_s: float = Field(60, gt=0, description="how long the router may take to see every replica")

    @classmethod
    def kind_name(cls) -> str:
        """The `kind:` value that selects this spec in a campaign (its Literal tag)."""
        return get_args(cls.model_fields["kind"].annotation)[0]

    @classmethod
    def policies(cls) -> tuple[str, ...]:
        return get_args(cls.model_fields["policy"].annotation)

    def describe(self) -> str:
        return f"{self.kind_name()} ({getattr(self, 'policy')})"
