"""This machine, as the records describe it: CPU, cores, memory, OS. /proc/cpuinfo is read here
and nowhere else."""
from __future__ import annotations

import os
import platform


def cpuinfo_line(key: str) -> str | None:
    """The first line of /proc/cpuinfo that starts with `key`, newline included (None if absent)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(key):
                    return line
    except OSError:
        pass
    return None


def cpu_flags_line() -> str:
    """The first 'flags' line, newline included: the key tools/bootstrap.sh builds llama.cpp under."""
    return cpuinfo_line("flags") or "unknown\n"


def cpu_model() -> str:
    line = cpuinfo_line("model name")
    return line.split(":", 1)[1].strip() if line else "unknown"


def host_identity() -> dict:
    import psutil

    return {"cpu": cpu_model(), "logical_cpus": os.cpu_count(),
            "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "os": f"{platform.system()} {platform.release()}", "python": platform.python_version(),
            "accelerator": "none (CPU)", "driver": "not applicable: no GPU"}
