"""Server-side evidence gathered beside the load: engine memory and the engine's own metrics."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil
from prometheus_client.parser import text_string_to_metric_families

from stackbook.engines import registry


def energy_joules(samples: list[dict]) -> float:
    """Energy one GPU drew over its power samples ({"t", "power_w"}): the trapezoid rule."""
    s = sorted(samples, key=lambda x: x["t"])
    return sum((b["t"] - a["t"]) * (a["power_w"] + b["power_w"]) / 2 for a, b in zip(s, s[1:]))


def gpu_window(samples: list[dict]) -> dict:
    """One GPU's samples over a window: memory peak, mean power, energy and how it was measured."""
    if not samples:
        return {"samples": 0}
    counter = [x["energy_mj"] for x in samples if x.get("energy_mj") is not None]
    if len(counter) == len(samples) and len(samples) > 1:
        energy, source = (counter[-1] - counter[0]) / 1000, "the GPU's energy counter"
    else:
        energy, source = energy_joules(samples), "NVML power samples, trapezoid rule"
    return {"samples": len(samples), "memory_used_gib_peak": round(max(x["memory_used_gib"] for x in samples), 3),
            "power_w_mean": round(sum(x["power_w"] for x in samples) / len(samples), 1),
            "energy_j": round(energy, 2), "energy_source": source}


class GpuSampler:
    """GPU memory, power and utilisation through NVML (pynvml), sampled in a thread beside the
    load. Where there is no NVIDIA driver it records why it is absent instead of guessing."""

    def __init__(self, interval_s: float = 0.5):
        self.interval_s = interval_s
        self.samples: list[dict] = []
        self.absent: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._nvml = None
        self._handles: list = []

    def _open(self) -> None:
        try:
            import pynvml
        except ImportError:
            self.absent = "pynvml is not installed"
            return
        try:
            pynvml.nvmlInit()
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except pynvml.NVMLError as err:
            self.absent = f"no NVIDIA GPU here (NVML: {err})"
            return
        self._nvml = pynvml
        if not self._handles:
            self.absent = "NVML found no GPU"

    def _run(self) -> None:
        nv = self._nvml
        while not self._stop.is_set():
            t = time.time()
            for i, h in enumerate(self._handles):
                try:
                    mem = nv.nvmlDeviceGetMemoryInfo(h)
                    util = nv.nvmlDeviceGetUtilizationRates(h)
                    power = nv.nvmlDeviceGetPowerUsage(h) / 1000
                except nv.NVMLError:
                    continue
                sample = {"t": t, "gpu": i, "memory_used_gib": mem.used / 2**30, "utilization_pct": util.gpu,
                          "power_w": power}
                try:  # the card's own energy counter (Volta and later), in millijoules since the driver loaded
                    sample["energy_mj"] = nv.nvmlDeviceGetTotalEnergyConsumption(h)
                except nv.NVMLError:
                    pass
                self.samples.append(sample)
            self._stop.wait(self.interval_s)

    def window(self, t0: float, t1: float) -> dict:
        """Each GPU's memory peak, mean power and energy between two unix times (one point):
        energy from the card's counter where it keeps one, else the power samples' integral."""
        if self.absent:
            return {"nvml": "absent", "reason": self.absent}
        inside = [s for s in self.samples if t0 <= s["t"] <= t1]
        return {"nvml": "present", "gpus": {i: gpu_window([s for s in inside if s["gpu"] == i])
                                           for i in sorted({s["gpu"] for s in self.samples})}}

    def summary(self) -> dict:
        if self.absent:
            return {"nvml": "absent", "reason": self.absent}
        out: dict = {"nvml": "present", "samples": len(self.samples), "gpus": {}}
        for i in sorted({s["gpu"] for s in self.samples}):
            mine = [s for s in self.samples if s["gpu"] == i]
            out["gpus"][i] = gpu_window(mine) | {
                "power_w_peak": round(max(s["power_w"] for s in mine), 1),
                "utilization_pct_mean": round(sum(s["utilization_pct"] for s in mine) / len(mine), 1)}
        return out

    def __enter__(self):
        self._open()
        if self._nvml and self._handles:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(2)
        if self._nvml:
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError:
                pass


def scrape_metrics(base_url: str, path: str | None = "/metrics", headers: dict | None = None) -> dict[str, float]:
    """Flatten the engine's Prometheus exposition into {'name{label=value}': value}."""
    if not path:
        return {}
    try:
        r = httpx.get(base_url + path, headers=headers or {}, timeout=5)
        r.raise_for_status()
    except httpx.HTTPError:
        return {}
    return parse_exposition(r.text)


def parse_exposition(text: str) -> dict[str, float]:
    """A Prometheus text exposition as {'name{label=value}': value}, the model and engine labels
    left out (they name what every series of one engine shares)."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items())
                              if k not in ("model_name", "engine"))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out


def metrics_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Counter increases and final gauge values for the series worth reporting: those the engine
    kinds keep (registry.series("kept")). Histograms keep their bucket increases only where a kind
    asks for them (registry.series("bucketed")), so a distribution's spread (its CV) can be
    estimated per point, not only its mean."""
    kept, bucketed = registry.series("kept"), registry.series("bucketed")
    out = {}
    for key, value in after.items():
        name = key.split("{", 1)[0]
        if not any(word in name for word in kept) or name.endswith(("_created", "_info")):
            continue
        if name.endswith("_bucket") and not name[:-len("_bucket")].endswith(bucketed):
            continue
        cumulative = name.endswith(("_total", "_count", "_sum", "_bucket"))
        out[key] = value - before.get(key, 0.0) if cumulative else value
    return out


def _gauge(key: str, gauges: tuple[str, ...]) -> bool:
    name = key.split("{", 1)[0]
    return any(word in name for word in gauges) and not name.endswith(
        ("_total", "_count", "_sum", "_bucket", "_created", "_info"))


class _ProcessSampler:
    """Samples taken by a separate process beside the load (`python -m stackbook.telemetry`):
    whatever it parses or walks, it never holds the client's interpreter lock, so it cannot delay
    a send. It appends JSON lines with wall-clock times to a file the client reads after each
    point, so each point takes the samples inside its window."""

    def __init__(self, kind: str, args: dict, interval_s: float, enabled: bool):
        self._argv = ["--kind", kind, "--interval", str(interval_s), "--args", json.dumps(args)]
        self._enabled = enabled
        self.samples: list[tuple[float, object]] = []
        self._proc: subprocess.Popen | None = None
        self._path: Path | None = None
        self._read = 0

    def __enter__(self):
        if self._enabled:
            fd, name = tempfile.mkstemp(prefix="stackbook-samples-", suffix=".jsonl")
            os.close(fd)
            self._path = Path(name)
            self._proc = subprocess.Popen([sys.executable, "-m", "stackbook.measure.telemetry", *self._argv,
                                           "--out", name, "--parent", str(os.getpid())],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return self

    def collect(self) -> None:
        if self._path is None or not self._path.exists():
            return
        with open(self._path, encoding="utf-8") as f:
            f.seek(self._read)
            for line in f:
                if not line.endswith("\n"):
                    break  # a line being written: read it next time
                self._read += len(line.encode())
                t, value = json.loads(line)
                self.samples.append((t, value))

    def __exit__(self, *exc):
        if self._proc is None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        self.collect()
        self._path.unlink(missing_ok=True)


def process_group(pid: int | list[int], attrs: tuple[str, ...] = ("pid",)) -> list[psutil.Process] | None:
    """The processes of the group `pid` leads (an engine and its workers), or of the groups a list
    of leaders lead (replicas and their router), each with `attrs` read into its `info`; None when
    every leader is gone."""
    pgids = set()
    for leader in pid if isinstance(pid, (list, tuple)) else [pid]:
        try:
            pgids.add(os.getpgid(leader))
        except (ProcessLookupError, PermissionError):
            continue
    if not pgids:
        return None
    members = []
    for p in psutil.process_iter(list(attrs)):
        try:
            if os.getpgid(p.info["pid"]) in pgids:
                members.append(p)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return members


def group_rss(pid: int | list[int]) -> int | None:
    """Resident memory of the whole process group `pid` leads (an engine and its workers)."""
    members = process_group(pid)
    if members is None:
        return None
    total = 0
    for p in members:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            continue
    return total


def group_usage(pid: int | list[int]) -> dict | None:
    """Resident memory and CPU seconds (user + system) of the process group `pid` leads, summed
    over its live members."""
    members = process_group(pid)
    if members is None:
        return None
    rss = cpu = 0.0
    for p in members:
        try:
            with p.oneshot():
                rss += p.memory_info().rss
                t = p.cpu_times()
                cpu += t.user + t.system
        except psutil.Error:
            continue
    return {"rss_bytes": int(rss), "cpu_s": round(cpu, 3)}


class RssSampler(_ProcessSampler):
    """The engine's resident memory and CPU seconds, whole process group, twice a second; with
    `keep`, every sample is appended there as it is read ([unix time, {rss_bytes, cpu_s}] per
    line), so the report can draw both over time."""

    def __init__(self, pid: int | None, interval_s: float = 0.5, keep: Path | None = None):
        super().__init__("usage", {"pid": pid}, interval_s, enabled=bool(pid))
        self._keep = Path(keep) if keep else None
        self._kept = 0

    def collect(self) -> None:
        super().collect()
        if self._keep is not None and len(self.samples) > self._kept:
            self._keep.parent.mkdir(parents=True, exist_ok=True)
            with open(self._keep, "a", encoding="utf-8") as f:
                f.writelines(json.dumps([t, v]) + "\n" for t, v in self.samples[self._kept:])
            self._kept = len(self.samples)

    @property
    def peak_bytes(self) -> int:
        self.collect()
        return max((v["rss_bytes"] for _, v in self.samples), default=0)


def engine_gauges(base_url: str | list[str], path: str) -> dict | None:
    """The engine's gauges; for several replicas (a list of addresses), each gauge summed over them."""
    gauges, values = registry.series("gauges"), {}
    for url in base_url if isinstance(base_url, list) else [base_url]:
        for k, v in scrape_metrics(url, path).items():
            if _gauge(k, gauges):
                values[k] = values.get(k, 0.0) + v
    return values or None


class GaugeSampler(_ProcessSampler):
    """The engine's gauges (requests running and waiting, KV-cache use) scraped *during* the load."""

    def __init__(self, base_url: str | list[str], path: str | None, interval_s: float = 1.0):
        super().__init__("gauges", {"base_url": base_url, "path": path}, interval_s, enabled=bool(path))

    def window(self, start: float, end: float) -> dict:
        """Mean and peak of each gauge over the samples taken in [start, end] (unix seconds)."""
        self.collect()
        inside = [v for t, v in self.samples if start <= t <= end]
        out: dict = {"samples": len(inside)}
        for key in sorted({k for v in inside for k in v}):
            xs = [v[key] for v in inside if key in v]
            out[key] = {"mean": round(sum(xs) / len(xs), 4), "max": round(max(xs), 4)}
        return out


def histogram_mean_ms(delta: dict, suffix: str) -> tuple[float | None, float]:
    """Mean of an engine histogram over a point (from the _sum and _count increases), in ms."""
    s = sum(v for k, v in delta.items() if k.split("{", 1)[0].endswith(f"{suffix}_sum"))
    c = sum(v for k, v in delta.items() if k.split("{", 1)[0].endswith(f"{suffix}_count"))
    return (s / c * 1000 if c else None), c


SAMPLERS = {"rss": group_rss, "usage": group_usage, "gauges": engine_gauges}


def main() -> None:
    """The sampling process: one JSON line [unix time, value] per sample until terminated, or
    until the process that started it is gone."""
    import argparse
    ap = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    ap.add_argument("--kind", choices=sorted(SAMPLERS), required=True)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--args", default="{}")
    ap.add_argument("--out", required=True)
    ap.add_argument("--parent", type=int, required=True)
    a = ap.parse_args()
    fn, kwargs = SAMPLERS[a.kind], json.loads(a.args)
    with open(a.out, "a", encoding="utf-8") as out:
        while psutil.pid_exists(a.parent):
            t = time.time()
            value = fn(**kwargs)
            if value is not None:
                out.write(json.dumps([t, value]) + "\n")
                out.flush()
            time.sleep(max(0.0, a.interval - (time.time() - t)))


if __name__ == "__main__":
    main()
