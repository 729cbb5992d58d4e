"""Observed token lengths read from a file: what an empirical length distribution draws from."""
from __future__ import annotations

import csv
import json
from functools import lru_cache

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
