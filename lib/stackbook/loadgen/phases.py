"""The phase of a request within its point: warm-up, measured, cool-down, or a sentinel."""
from __future__ import annotations

from enum import Enum


class Phase(str, Enum):
    """Stored as its value ("measure", ...), so records read and write as plain strings and
    compare equal to them; printed as its value too."""
    WARMUP = "warmup"
    MEASURE = "measure"
    COOLDOWN = "cooldown"
    SENTINEL = "sentinel"

    __str__ = str.__str__
    __format__ = str.__format__
    __hash__ = str.__hash__


MEASURED_LOAD = (Phase.MEASURE,
                 Phase.SENTINEL)  # the requests of the measurement window: the load the protocol asked for
