"""What happened over time during an arm's sweep, from its raw records and the engine's samples:
one row per request (send, first token, last token), output tokens per second, and the engine's
CPU and resident memory. Times are seconds since the arm's first send (wall clock)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from stackbook.loadgen.records import RequestRecord


def _unix(r: RequestRecord, t: float | None) -> float | None:
    """A record's time (seconds on its point's clock) as wall-clock seconds."""
    return None if t is None else r.sent_unix + (t - r.sent_s)


def request_timeline(records: list[RequestRecord]) -> pd.DataFrame:
    """One row per request, in send order: point, phase, and its send, first-token and last-byte
    times from the arm's first send."""
    if not records:
        return pd.DataFrame(columns=["point", "phase", "ok", "sent", "first_token", "end"])
    t0 = min(r.sent_unix for r in records)
    rows = [{"point": r.point, "phase": r.phase, "ok": r.ok, "sent": r.sent_unix - t0,
             "first_token": (_unix(r, r.first_token_s) - t0) if r.first_token_s is not None else None,
             "end": _unix(r, r.end_s) - t0} for r in records]
    return pd.DataFrame(rows).sort_values("sent").reset_index(drop=True)


def throughput_over_time(records: list[RequestRecord], bin_s: float = 1.0) -> pd.DataFrame:
    """Output tokens streamed per second, in bins of `bin_s`, from every chunk's arrival time
    (warm-up and cool-down included: they run at the same load), with the point each bin is in."""
    if not records:
        return pd.DataFrame(columns=["t", "tokens_per_s", "point"])
    t0 = min(r.sent_unix for r in records)
    times, tokens = [], []
    for r in records:
        for t, n in zip(r.chunk_times_s, r.chunk_tokens):
            times.append(_unix(r, t) - t0)
            tokens.append(n)
    if not times:
        return pd.DataFrame(columns=["t", "tokens_per_s", "point"])
    edges = np.arange(0, max(times) + bin_s, bin_s)
    counts, _ = np.histogram(times, bins=edges, weights=tokens)
    spans = sorted(((min(r.sent_unix for r in rs) - t0, max(_unix(r, r.end_s) for r in rs) - t0, p)
                    for p, rs in _by_point(records).items()))
    mids = edges[:-1] + bin_s / 2
    point = [next((p for a, b, p in spans if a <= m <= b), None) for m in mids]
    return pd.DataFrame({"t": mids, "tokens_per_s": counts / bin_s, "point": point})


def _by_point(records: list[RequestRecord]) -> dict[str, list[RequestRecord]]:
    out: dict[str, list[RequestRecord]] = {}
    for r in records:
        out.setdefault(r.point, []).append(r)
    return out


def point_spans(records: list[RequestRecord]) -> pd.DataFrame:
    """Each point's first send and last reply, from the arm's first send."""
    if not records:
        return pd.DataFrame(columns=["point", "start", "end"])
    t0 = min(r.sent_unix for r in records)
    return pd.DataFrame([{"point": p, "start": min(r.sent_unix for r in rs) - t0,
                          "end": max(_unix(r, r.end_s) for r in rs) - t0}
                         for p, rs in _by_point(records).items()]).sort_values("start")


def read_engine_samples(path: str | os.PathLike, t0: float | None = None) -> pd.DataFrame:
    """The engine's samples ([unix time, {"rss_bytes", "cpu_s"}] per line, whole process group)
    as seconds from `t0` (default: the first sample), RSS in GiB and CPU in cores busy (the CPU
    seconds' increase over each interval). Empty when the run did not keep them."""
    p = Path(path)
    if not p.exists():
        return pd.DataFrame(columns=["t", "rss_gib", "cpu_cores"])
    rows = []
    for line in p.read_text(encoding="utf-8").splitlines():
        try:
            t, v = json.loads(line)
        except ValueError:
            continue  # a line cut by a crash
        rows.append({"unix": t, "rss_gib": v.get("rss_bytes", 0) / 2**30, "cpu_s": v.get("cpu_s")})
    df = pd.DataFrame(rows).sort_values("unix")
    if df.empty:
        return pd.DataFrame(columns=["t", "rss_gib", "cpu_cores"])
    df["t"] = df["unix"] - (t0 if t0 is not None else df["unix"].iloc[0])
    df["cpu_cores"] = (df["cpu_s"].diff() / df["unix"].diff()).clip(lower=0)
    return df[["t", "rss_gib", "cpu_cores"]].reset_index(drop=True)


def first_send_unix(records: list[RequestRecord]) -> float | None:
    return min((r.sent_unix for r in records), default=None)
