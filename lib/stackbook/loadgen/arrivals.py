"""Arrival schedules as absolute offsets from the start of a point (seconds).

Each request is sent at its own deadline, computed up front from the seed: a slow send never
pushes the following ones later (no accumulated drift), and the lag between deadline and actual
send is recorded for every request.
"""
from __future__ import annotations

import csv
import json
import random
from pathlib import Path


def constant_schedule(rate: float, n: int) -> list[float]:
    return [i / rate for i in range(n)]


def poisson_schedule(rate: float, n: int, seed: int) -> list[float]:
    """Exponential inter-arrival times: coefficient of variation 1."""
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        out.append(t)
        t += rng.expovariate(rate)
    return out


def gamma_schedule(rate: float, n: int, burstiness: float, seed: int) -> list[float]:
    """Gamma inter-arrival times with mean 1/rate and squared coefficient of variation
    `burstiness` (1 = Poisson, above 1 burstier, below 1 more regular)."""
    if burstiness <= 0:
        raise ValueError("burstiness must be positive (1 is Poisson)")
    shape = 1.0 / burstiness
    scale = 1.0 / (rate * shape)
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        out.append(t)
        t += rng.gammavariate(shape, scale)
    return out


def read_trace(path: str | Path) -> list[dict]:
    """A trace of requests: JSON lines or CSV with timestamp_s, prompt_tokens and output_tokens.
    Timestamps are made relative to the first one."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"trace file {path} does not exist")
    if p.suffix == ".csv":
        with open(p, newline="") as f:
            rows = list(csv.DictReader(f))
    else:
        rows = [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
    out = []
    for i, r in enumerate(rows):
        try:
            out.append({"timestamp_s": float(r["timestamp_s"]), "prompt_tokens": int(r["prompt_tokens"]),
                        "output_tokens": int(r["output_tokens"])})
        except (KeyError, ValueError) as err:
            raise ValueError(f"{path}: row {i + 1} needs timestamp_s, prompt_tokens and output_tokens ({err})") from None
    if not out:
        raise ValueError(f"{path}: the trace is empty")
    out.sort(key=lambda r: r["timestamp_s"])
    t0 = out[0]["timestamp_s"]
    for r in out:
        r["timestamp_s"] -= t0
    return out
