"""The GPU check: what a GPU host is, measured in a few minutes with nothing downloaded, written in
a fixed format (`stackbook-gpu-check/1`) so a run can be committed as evidence.

It records the GPUs' identity as the passport records it (NVML: name, UUID, memory, driver, CUDA),
the HBM bandwidth measured with torch where torch is installed (a device-to-device copy, read plus
write), NVML telemetry (memory, utilisation, power, energy) sampled while that copy loop runs, and
which GPU engines of the registry are installed in the cache, with their versions. Run it through
benchmarks/gpu_check.sh, which refuses where no GPU is found.
"""
from __future__ import annotations

import argparse
import json
import platform
import socket
import subprocess
import sys
import time
from pathlib import Path

FORMAT = "stackbook-gpu-check/1"


def gpu_kinds() -> list[str]:
    """The engine kinds that serve only on an accelerator (each declares needs_gpu)."""
    from stackbook.engines.registry import gpu_kinds as registered
    return registered()


def gpu_identity() -> dict:
    """Driver, CUDA driver version and each GPU, read through NVML."""
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception as err:  # the NVML library raises its own error types, or is absent
        return {"nvml": "absent", "reason": str(err)}
    try:
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            gpus.append({"index": i, "name": _text(pynvml.nvmlDeviceGetName(h)),
                         "uuid": _text(pynvml.nvmlDeviceGetUUID(h)), "memory_total_bytes": mem.total,
                         "memory_free_bytes_before": mem.free})
        return {"nvml": "present", "driver": _text(pynvml.nvmlSystemGetDriverVersion()),
                "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}", "gpus": gpus}
    finally:
        pynvml.nvmlShutdown()


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def energy_mj() -> dict[int, int]:
    """Each GPU's energy counter (millijoules since the driver loaded), where the GPU has one."""
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception:
        return {}
    out = {}
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            try:
                out[i] = pynvml.nvmlDeviceGetTotalEnergyConsumption(pynvml.nvmlDeviceGetHandleByIndex(i))
            except pynvml.NVMLError:
                pass
    finally:
        pynvml.nvmlShutdown()
    return out


def hbm_bandwidth(seconds: float, gib: float) -> dict:
    """Device-to-device copies of a `gib` GiB buffer for about `seconds`: bytes read plus written
    over the time CUDA events measure. The load during which telemetry is sampled."""
    try:
        import torch
    except ImportError:
        return {"measured": False, "reason": "torch is not installed in this environment"}
    if not torch.cuda.is_available():
        return {"measured": False, "reason": "torch sees no CUDA device"}
    n = int(gib * 2**30) // 4
    src = torch.empty(n, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    for _ in range(3):  # warm-up
        dst.copy_(src)
    torch.cuda.synchronize()
    rates = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(10):
            dst.copy_(src)
        end.record()
        torch.cuda.synchronize()
        rates.append(2 * src.numel() * 4 * 10 / (start.elapsed_time(end) / 1000))
    rates.sort()
    return {"measured": True, "method": f"torch copy_ of a {gib:g} GiB fp32 buffer on cuda:0, read + write bytes",
            "torch": torch.__version__, "device": torch.cuda.get_device_name(0), "repeats": len(rates),
            "bytes_per_s_median": rates[len(rates) // 2], "bytes_per_s_max": rates[-1]}


def torch_interpreter() -> str | None:
    """The first interpreter that has torch with a CUDA device: this one, else a GPU engine's
    environment in the cache (the workbook itself does not install torch)."""
    from stackbook.engines import ADAPTERS
    candidates = [sys.executable] + [str(ADAPTERS[k].installed_executable()) for k in gpu_kinds()]
    for exe in candidates:
        if not Path(exe).exists():
            continue
        try:
            res = subprocess.run([exe, "-c", "import torch; print(torch.cuda.is_available())"], capture_output=True,
                                 text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if res.stdout.strip() == "True":
            return exe
    return None


def measure_bandwidth(seconds: float, gib: float) -> dict:
    """hbm_bandwidth() run by an interpreter with torch, in a child process."""
    exe = torch_interpreter()
    if exe is None:
        return {"measured": False, "reason": "no torch with a CUDA device here or in a GPU engine's environment"}
    res = subprocess.run([exe, __file__, "--bandwidth-only", "--load-seconds", str(seconds), "--buffer-gib", str(gib)],
                         capture_output=True, text=True, timeout=seconds + 300)
    try:
        out = json.loads(res.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {"measured": False, "reason": f"the measurement failed: {res.stderr.strip()[-500:]}"}
    from stackbook.locations import symbolic
    return out | {"interpreter": symbolic(exe)}


def installed_engines() -> dict:
    """Each GPU kind: is its cache environment there, and which versions it holds (nothing is started)."""
    from stackbook.engines import ADAPTERS
    from stackbook.locations import symbolic
    out = {}
    for kind in gpu_kinds():
        adapter = ADAPTERS[kind]
        exe = adapter.installed_executable()
        entry = {"environment": symbolic(exe.parent.parent), "installed": exe.exists(),
                 "pinned_version": adapter.pinned_version}
        if exe.exists():
            code = ("import importlib.metadata as m, sys\n"
                    "for d in sys.argv[1:]:\n"
                    "    try: print(d, m.version(d))\n"
                    "    except m.PackageNotFoundError: print(d, 'not-installed')")
            res = subprocess.run([str(exe), "-c", code, *adapter.distributions], capture_output=True, text=True,
                                 timeout=120)
            entry["versions"] = dict(line.split(" ", 1) for line in res.stdout.splitlines() if " " in line)
        else:
            entry["hint"] = adapter.install_hint()
        out[kind] = entry
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="the JSON file to write")
    ap.add_argument("--load-seconds", type=float, default=20.0)
    ap.add_argument("--buffer-gib", type=float, default=2.0)
    ap.add_argument("--bandwidth-only", action="store_true", help="(internal) measure and print one JSON line")
    args = ap.parse_args()
    if args.bandwidth_only:
        print(json.dumps(hbm_bandwidth(args.load_seconds, args.buffer_gib)))
        return
    if args.out is None:
        ap.error("--out is required")
    from stackbook.measure.telemetry import GpuSampler
    t0 = time.time()
    result: dict = {"format": FORMAT, "started_unix": round(t0, 3), "host": socket.gethostname(),
                    "platform": platform.platform(), "identity": gpu_identity()}
    before = energy_mj()
    with GpuSampler(interval_s=0.25) as sampler:
        result["hbm_bandwidth"] = measure_bandwidth(args.load_seconds, args.buffer_gib)
        if not result["hbm_bandwidth"]["measured"]:
            time.sleep(min(5.0, args.load_seconds))  # idle telemetry, said so below
    after = energy_mj()
    result["telemetry_during_load"] = sampler.summary() | {
        "load": "the bandwidth copy loop" if result["hbm_bandwidth"]["measured"] else "none (idle)",
        "energy_j": {i: round((after[i] - before[i]) / 1000, 1) for i in after if i in before} or
        "not measured: no energy counter"}
    result["engines"] = installed_engines()
    result["seconds"] = round(time.time() - t0, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    bw = result["hbm_bandwidth"]
    print(f"{FORMAT}: {args.out}")
    for g in result["identity"].get("gpus", []):
        print(f"  GPU {g['index']}: {g['name']}, {g['memory_total_bytes'] / 2**30:.1f} GiB")
    print("  HBM bandwidth: " + (f"{bw['bytes_per_s_median'] / 1e12:.2f} TB/s median" if bw["measured"]
                                 else f"not measured ({bw['reason']})"))
    for kind, e in result["engines"].items():
        print(f"  {kind}: " + (f"installed {e.get('versions')}" if e["installed"] else "not installed"))


if __name__ == "__main__":
    main()
