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


ISA_PREFIXES = ("avx2", "avx512", "amx", "avx_vnni", "fma", "f16c")


def isa_flags(flags_line: str | None = None) -> list[str]:
    """The instruction-set extensions that decide which kernels an engine can use (AVX2, every
    AVX-512 subset, AMX), from a cpuinfo 'flags' line."""
    line = flags_line if flags_line is not None else cpu_flags_line()
    words = line.split(":", 1)[1].split() if ":" in line else []
    return sorted(w for w in words if w.startswith(ISA_PREFIXES))


def gpus_by_nvml() -> dict:
    """Every NVIDIA GPU as NVML reports it (name, memory, driver, CUDA version), or why none."""
    try:
        import pynvml
    except ImportError:
        return {"nvml": "absent", "gpus": [], "reason": "pynvml is not installed"}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as err:
        return {"nvml": "absent", "gpus": [], "reason": f"no NVIDIA GPU found by NVML ({err})"}
    try:
        def text(v):
            return v.decode() if isinstance(v, bytes) else str(v)
        cuda = pynvml.nvmlSystemGetCudaDriverVersion()
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            gpus.append({"index": i, "name": text(pynvml.nvmlDeviceGetName(h)),
                         "memory_gib": round(pynvml.nvmlDeviceGetMemoryInfo(h).total / 2**30, 2)})
        return {"nvml": "present", "driver": text(pynvml.nvmlSystemGetDriverVersion()),
                "cuda": f"{cuda // 1000}.{cuda % 1000 // 10}", "gpus": gpus}
    finally:
        pynvml.nvmlShutdown()


def accelerator_fields(nvml: dict) -> dict:
    """The passport's accelerator and driver, as measured: NVML's GPUs, or why there are none."""
    if not nvml.get("gpus"):
        why = nvml.get("reason") or "no NVIDIA GPU found by NVML"
        return {"accelerator": f"none: {why}", "driver": f"not applicable: {why}"}
    names = sorted({f"{g['name']} ({g['memory_gib']} GiB)" for g in nvml["gpus"]})
    return {"accelerator": f"{len(nvml['gpus'])} x {', '.join(names)}", "gpus": nvml["gpus"],
            "driver": f"NVIDIA {nvml['driver']}, CUDA {nvml['cuda']}"}


def host_identity() -> dict:
    """This machine, measured: CPU model, cores, memory, instruction-set flags, and its GPUs by NVML."""
    import psutil

    return {"cpu": cpu_model(), "logical_cpus": os.cpu_count(), "physical_cores": psutil.cpu_count(logical=False),
            "memory_gib": round(psutil.virtual_memory().total / 2**30, 1), "isa_flags": isa_flags(),
            "os": f"{platform.system()} {platform.release()}", "python": platform.python_version(),
            **accelerator_fields(gpus_by_nvml())}
