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
    """One device as its vendor or the seed describes it. `max_cards`: how many of it one
    deployment may shard a model across (1: a single machine such as a Mac or a laptop);
    `sizing_target`: False for a silicon example the sizing tables do not offer as an option."""
    key: str
    name: str
    memory_bytes: float
    bandwidth: float | None
    bf16_tflops: float | None
    source: str
    platform: str = "other"
    max_cards: int = 1
    sizing_target: bool = True

    @property
    def usable_bytes(self) -> float:
        return self.memory_bytes * USABLE_FRACTION


# The catalog's memory is the datasheet's, in bytes (its GB x 1e9), and all of it is offered to the
# arithmetic: what a runtime keeps back (CUDA context, allocator, the engine's own utilization
# fraction) is workspace, activations and the engine's accounting, stated where they are subtracted.
USABLE_FRACTION = 1.0


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


BANDWIDTH_TRIALS = 10
BANDWIDTH_BUFFER_BYTES = 64 * 2**20


def measure_cpu_bandwidth(trials: int = BANDWIDTH_TRIALS, buffer_bytes: int = BANDWIDTH_BUFFER_BYTES) -> dict:
    """Memory-copy bandwidth of this host (one core, numpy), over repeated trials: the mean, its
    95% confidence interval and every trial, so the bound it gives carries its own uncertainty."""
    import time

    import numpy as np

    from stackbook.stats import mean_ci95

    a = np.ones(buffer_bytes // 8)
    b = np.empty_like(a)
    np.copyto(b, a)  # touch both buffers once so page faults do not count
    rates = []
    for _ in range(trials):
        t = time.perf_counter()
        np.copyto(b, a)
        rates.append(2 * a.nbytes / (time.perf_counter() - t))  # one read and one write per element
    mean, ci = mean_ci95(rates)
    return {"bandwidth_bytes_s": mean, "ci95_bytes_s": ci, "trials": len(rates),
            "trial_bytes_s": [round(r) for r in rates], "buffer_bytes": buffer_bytes,
            "method": "numpy copy of a 64 MiB buffer, one core; mean of trials, t-interval"}


def this_cpu(measure_bandwidth: bool = True, bandwidth: dict | None = None) -> Accelerator:
    """This machine: total memory, and its memory-copy bandwidth, measured now or as already
    measured for this run (`bandwidth`, from measure_cpu_bandwidth), so every arm uses one figure."""
    import psutil

    if bandwidth is None and measure_bandwidth:
        bandwidth = measure_cpu_bandwidth()
    bw = (bandwidth or {}).get("bandwidth_bytes_s") or 0.0
    ci = (bandwidth or {}).get("ci95_bytes_s")
    how = (f"numpy copy bandwidth {bw / 1e9:.2f} GB/s ± {ci / 1e9:.2f} (95% CI, {bandwidth['trials']} trials)"
           if bw and ci is not None else "numpy copy bandwidth")
    return Accelerator("this-cpu", f"this CPU ({os.cpu_count()} cores)", float(psutil.virtual_memory().total),
                       bw, None, f"measured at run time: psutil total memory, {how}")
