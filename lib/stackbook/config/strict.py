"""The base of every campaign model: an unknown key is an error, never silently ignored."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)
