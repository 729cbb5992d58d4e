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
