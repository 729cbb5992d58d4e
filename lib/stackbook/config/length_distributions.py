"""Token-length distributions of a workload: each one bounds, averages, samples and describes
itself. Samples are seeded, so a campaign's prompts are the same on every run."""
from __future__ import annotations

import math
from typing import Annotated, Literal, Union

import numpy as np
from pydantic import BeforeValidator, Field, model_validator

from stackbook.config.strict import Strict
from stackbook.loadgen.lengths import read_empirical

# Samples drawn to estimate the mean of a clipped distribution (clipping moves it off the formula).
MEAN_SAMPLE_SIZE = 20_000


def _min_not_above_max(dist):
    if dist.min > dist.max:
        raise ValueError(f"min ({dist.min}) is above max ({dist.max}); swap them")
    return dist


class FixedLength(Strict):
    kind: Literal["fixed"]
    tokens: int = Field(gt=0)

    def bounds(self) -> tuple[int, int]:
        """The shortest and longest length the distribution can give."""
        return self.tokens, self.tokens

    def mean_tokens(self) -> float:
        return float(self.tokens)

    def sample(self, n: int, seed: int) -> list[int]:
        """`n` lengths, reproducible from `seed`."""
        return [self.tokens] * n

    def describe(self) -> str:
        return f"{self.tokens}"


class BoundedLength(Strict):
    """Lengths between `min` and `max` inclusive: the bounds are what the context check reads."""
    min: int = Field(1, gt=0)
    max: int = Field(gt=0)

    @model_validator(mode="after")
    def _ordered(self):
        return _min_not_above_max(self)

    def bounds(self) -> tuple[int, int]:
        return self.min, self.max


class UniformLength(BoundedLength):
    kind: Literal["uniform"]
    min: int = Field(gt=0)

    def mean_tokens(self) -> float:
        return (self.min + self.max) / 2

    def sample(self, n: int, seed: int) -> list[int]:
        return np.random.default_rng(seed).integers(self.min, self.max + 1, size=n).tolist()

    def describe(self) -> str:
        return f"uniform {self.min}-{self.max}"


class ClippedLength(BoundedLength):
    """Drawn, rounded and clipped to [min, max]; the upper bound is required because it decides
    whether every request fits the context."""

    def mean_tokens(self) -> float:
        """The mean after rounding and clipping, estimated by a large seeded sample."""
        return float(np.mean(self.sample(MEAN_SAMPLE_SIZE, seed=0)))

    def sample(self, n: int, seed: int) -> list[int]:
        raw = self.draw(np.random.default_rng(seed), n)
        return np.clip(np.rint(raw), self.min, self.max).astype(int).tolist()

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """`n` unrounded, unclipped values."""
        raise NotImplementedError


class NormalLength(ClippedLength):
    kind: Literal["normal"]
    mean: float = Field(gt=0)
    std: float = Field(ge=0)

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.normal(self.mean, self.std, size=n)

    def describe(self) -> str:
        return f"normal mean {self.mean:g}, sd {self.std:g}, clipped {self.min}-{self.max}"


class LognormalLength(ClippedLength):
    """Long-tailed, as real prompt and answer lengths are; sigma is that of log(length)."""
    kind: Literal["lognormal"]
    median: float = Field(gt=0)
    sigma: float = Field(gt=0)

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.lognormal(math.log(self.median), self.sigma, size=n)

    def describe(self) -> str:
        return f"lognormal median {self.median:g}, sigma {self.sigma:g}, clipped {self.min}-{self.max}"


class EmpiricalLength(Strict):
    """Lengths drawn (with replacement) from observed ones: a CSV or JSONL file and its column,
    or a plain text file with one number per line."""
    kind: Literal["empirical"]
    path: str
    column: str | None = None

    @model_validator(mode="after")
    def _readable(self) -> "EmpiricalLength":
        self.observed()  # raises with the file, the column and the fix
        return self

    def observed(self) -> list[int]:
        return read_empirical(self.path, self.column)

    def bounds(self) -> tuple[int, int]:
        values = self.observed()
        return min(values), max(values)

    def mean_tokens(self) -> float:
        return float(np.mean(self.observed()))

    def sample(self, n: int, seed: int) -> list[int]:
        return np.random.default_rng(seed).choice(np.array(self.observed()), size=n, replace=True).tolist()

    def describe(self) -> str:
        return f"empirical from {self.path}" + (f" ({self.column})" if self.column else "")


def _plain_number_is_fixed(v):
    return {"kind": "fixed", "tokens": v} if isinstance(v, int) and not isinstance(v, bool) else v


LengthDistribution = Annotated[Union[FixedLength, UniformLength, NormalLength, LognormalLength, EmpiricalLength],
                               Field(discriminator="kind")]
# A plain number means a fixed length.
Length = Annotated[LengthDistribution, BeforeValidator(_plain_number_is_fixed)]
