"""Token-length distributions of a workload: sampling, bounds and means (pure, seeded)."""
from __future__ import annotations

import csv
import json
import math
from functools import lru_cache

import numpy as np

from stackbook.locations import resolve_symbolic


@lru_cache(maxsize=16)
def _read_empirical(path: str, column: str | None) -> tuple[int, ...]:
    p = resolve_symbolic(path)
    if not p.exists():
        raise ValueError(f"length file {path!r} does not exist; give a CSV or JSONL file with a length column, "
                         "or a text file with one number per line")
    text = p.read_text(encoding="utf-8")
    values: list = []
    if p.suffix == ".jsonl":
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        values = [r.get(column) for r in rows] if column else []
    elif p.suffix == ".csv":
        rows = list(csv.DictReader(text.splitlines()))
        values = [r.get(column) for r in rows] if column else []
    else:
        values = [line.strip() for line in text.splitlines() if line.strip()]
    if p.suffix in (".csv", ".jsonl"):
        if not column:
            raise ValueError(f"length file {path!r} is a table: name the column to read with `column:`")
        if not rows or column not in rows[0]:
            have = sorted(rows[0]) if rows else []
            raise ValueError(f"length file {path!r} has no column {column!r}; its columns: {have}")
    try:
        out = tuple(int(float(v)) for v in values)
    except (TypeError, ValueError):
        raise ValueError(f"length file {path!r}: every {column or 'line'} must be a number of tokens") from None
    if not out or min(out) <= 0:
        raise ValueError(f"length file {path!r} must hold at least one positive length")
    return out


def read_empirical(path: str, column: str | None = None) -> list[int]:
    return list(_read_empirical(path, column))


def length_bounds(dist) -> tuple[int, int]:
    """The shortest and longest length the distribution can give."""
    if isinstance(dist, int):
        return dist, dist
    if dist.kind == "fixed":
        return dist.tokens, dist.tokens
    if dist.kind == "empirical":
        values = _read_empirical(dist.path, dist.column)
        return min(values), max(values)
    return dist.min, dist.max


def length_mean(dist) -> float:
    """The distribution's mean after rounding and clipping (estimated by a large seeded sample)."""
    if isinstance(dist, int):
        return float(dist)
    if dist.kind == "fixed":
        return float(dist.tokens)
    if dist.kind == "empirical":
        return float(np.mean(_read_empirical(dist.path, dist.column)))
    return float(np.mean(sample_lengths(dist, 20_000, seed=0)))


def sample_lengths(dist, n: int, seed: int) -> list[int]:
    """`n` lengths drawn from the distribution, reproducible from `seed`."""
    rng = np.random.default_rng(seed)
    if isinstance(dist, int):
        return [dist] * n
    kind = dist.kind
    if kind == "fixed":
        return [dist.tokens] * n
    if kind == "uniform":
        return rng.integers(dist.min, dist.max + 1, size=n).tolist()
    if kind == "empirical":
        values = np.array(_read_empirical(dist.path, dist.column))
        return rng.choice(values, size=n, replace=True).tolist()
    if kind == "normal":
        raw = rng.normal(dist.mean, dist.std, size=n)
    elif kind == "lognormal":
        raw = rng.lognormal(math.log(dist.median), dist.sigma, size=n)
    else:
        raise ValueError(f"unknown length distribution {kind!r}")
    return np.clip(np.rint(raw), dist.min, dist.max).astype(int).tolist()


def describe_length(dist) -> str:
    if isinstance(dist, int):
        return f"{dist}"
    if dist.kind == "fixed":
        return f"{dist.tokens}"
    if dist.kind == "uniform":
        return f"uniform {dist.min}-{dist.max}"
    if dist.kind == "normal":
        return f"normal mean {dist.mean:g}, sd {dist.std:g}, clipped {dist.min}-{dist.max}"
    if dist.kind == "lognormal":
        return f"lognormal median {dist.median:g}, sigma {dist.sigma:g}, clipped {dist.min}-{dist.max}"
    return f"empirical from {dist.path}" + (f" ({dist.column})" if dist.column else "")
