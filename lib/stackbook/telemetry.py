"""Server-side evidence gathered beside the load: engine memory and the engine's own metrics."""
from __future__ import annotations

import os
import threading
import time

import httpx
import psutil
from prometheus_client.parser import text_string_to_metric_families


class RssSampler:
    """Samples the resident memory of the engine's whole process group in a thread."""

    def __init__(self, pid: int | None, interval_s: float = 0.5):
        self.pid = pid
        self.interval_s = interval_s
        self.peak_bytes = 0
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def group_rss(self) -> int:
        if not self.pid:
            return 0
        try:
            pgid = os.getpgid(self.pid)
        except ProcessLookupError:
            return 0
        total = 0
        for p in psutil.process_iter(["pid"]):
            try:
                if os.getpgid(p.info["pid"]) == pgid:
                    total += p.memory_info().rss
            except (ProcessLookupError, psutil.Error):
                continue
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = self.group_rss()
            self.samples.append((time.time(), rss))
            self.peak_bytes = max(self.peak_bytes, rss)
            self._stop.wait(self.interval_s)

    def __enter__(self):
        if self.pid:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(2)


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
                self.samples.append({"t": t, "gpu": i, "memory_used_gib": mem.used / 2**30,
                                     "utilization_pct": util.gpu, "power_w": power})
            self._stop.wait(self.interval_s)

    def summary(self) -> dict:
        if self.absent:
            return {"nvml": "absent", "reason": self.absent}
        out: dict = {"nvml": "present", "samples": len(self.samples), "gpus": {}}
        for i in sorted({s["gpu"] for s in self.samples}):
            mine = [s for s in self.samples if s["gpu"] == i]
            out["gpus"][i] = {"memory_used_gib_peak": round(max(s["memory_used_gib"] for s in mine), 3),
                              "power_w_mean": round(sum(s["power_w"] for s in mine) / len(mine), 1),
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
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items())
                              if k not in ("model_name", "engine"))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out


INTERESTING = ("prefix_cache", "kv_cache_usage", "num_requests_running", "num_requests_waiting",
               "preemptions", "prompt_tokens_total", "generation_tokens_total", "tokens_predicted_total",
               "prompt_tokens_seconds", "predicted_tokens_seconds", "requests_processing", "kv_cache_usage_ratio")


def metrics_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Counter increases and final gauge values for the series worth reporting."""
    out = {}
    for key, value in after.items():
        name = key.split("{", 1)[0]
        if not any(word in name for word in INTERESTING) or name.endswith(("_created", "_bucket", "_info")):
            continue
        out[key] = value - before.get(key, 0.0) if name.endswith(("_total", "_count", "_sum")) else value
    return out
