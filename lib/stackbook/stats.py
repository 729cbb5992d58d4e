"""The two summaries every layer takes of a sample, defined once: a percentile (linear
interpolation between order statistics, numpy's default, as the peers' tables use) and a mean
with the half-width of its 95% t-interval."""
from __future__ import annotations

import math

import numpy as np


def _finite(values) -> np.ndarray:
    return np.asarray([x for x in values if x is not None and not (isinstance(x, float) and math.isnan(x))], float)


def sample_percentile(values, pct: float) -> float | None:
    """The `pct`-th percentile of the sample (None and NaN left out); None for an empty one."""
    v = _finite(values)
    return float(np.percentile(v, pct)) if v.size else None


def mean_ci95(values) -> tuple[float | None, float | None]:
    """Mean and the half-width of its 95% confidence interval (t distribution); no half-width
    from fewer than two values."""
    v = _finite(values)
    if v.size < 2:
        return (float(v.mean()) if v.size else None, None)
    from scipy import stats as st  # noqa: PLC0415 - scipy is only needed here

    return float(v.mean()), float(st.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
