"""The device a campaign sizes for: the accelerator catalog, and this host measured at run time."""
from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from functools import lru_cache

import yaml

from stackbook.locations import DATA_DIR


@dataclass(frozen=True)
class Accelerator:
    key: str
    name: str
    memory_bytes: float
    bandwidth: float
    bf16_tflops: float | None
    source: str
    usable_bytes: float | None = None


@lru_cache(maxsize=1)
def accelerator_catalog() -> dict[str, Accelerator]:
    raw = yaml.safe_load((DATA_DIR / "accelerators.yaml").read_text())
    return {k: Accelerator(key=k, **v) for k, v in raw.items()}


def accelerator(key: str) -> Accelerator:
    cat = accelerator_catalog()
    if key == "this-cpu":
        return this_cpu()
    if key not in cat:
        close = difflib.get_close_matches(key, [*cat, "this-cpu"], n=3, cutoff=0.4)
        raise KeyError(f"unknown hardware {key!r}; close matches: {close or 'none'}; "
                       f"catalog: {sorted(cat)} and this-cpu")
    return cat[key]


def this_cpu(measure_bandwidth: bool = True) -> Accelerator:
    """This machine: total memory, and a measured memory-copy bandwidth (one core, numpy)."""
    import numpy as np
    import psutil

    bw = 0.0
    if measure_bandwidth:
        import time
        a = np.ones(64 * 2**20 // 8)
        b = np.empty_like(a)
        best = float("inf")
        for _ in range(5):
            t = time.perf_counter()
            np.copyto(b, a)
            best = min(best, time.perf_counter() - t)
        bw = 2 * a.nbytes / best  # one read and one write per element
    return Accelerator("this-cpu", f"this CPU ({os.cpu_count()} cores)", float(psutil.virtual_memory().total),
                       bw, None, "measured at run time: psutil total memory, numpy copy bandwidth")
