"""Where a run's time went, from its manifest: engine starts, the sizing and canary notebooks, the
sweeps (every repetition), the analysis, and the rest (kernels starting, engines stopping, the
harness ceiling, resumed gaps). Kept in the manifest and printed at the end of `stackbook run`,
so a campaign that takes too long says which part to cut."""
from __future__ import annotations

PHASES = ("engine starts", "sizing", "canaries", "sweeps", "analysis", "other")


def phase_times(manifest: dict) -> dict[str, float]:
    """Seconds per phase, and the wall time from creation to finish (where both are known)."""
    arms = (manifest.get("arms") or {}).values()
    out = dict.fromkeys(PHASES, 0.0)
    for a in arms:
        log = (a.get("repetition_log") or {}).values()
        starts = [r["engine_ready_s"] for r in log if r.get("engine_ready_s") is not None]
        # A run recorded before each slot's start was kept: its last start, once per start.
        out["engine starts"] += (sum(starts) if starts
                                 else (a.get("engine_ready_s") or 0) * (a.get("engine_starts") or 0))
        books = a.get("notebooks") or {}
        out["sizing"] += (books.get("10_sizing") or {}).get("seconds") or 0
        out["canaries"] += (books.get("20_canaries") or {}).get("seconds") or 0
        sweeps = [r.get("sweep_seconds") or 0 for r in log]
        out["sweeps"] += sum(sweeps) if sweeps else (books.get("30_load_sweep") or {}).get("seconds") or 0
    out["analysis"] = (manifest.get("analysis") or {}).get("seconds") or 0
    created, finished = manifest.get("created_unix"), manifest.get("finished_unix")
    if created and finished:
        out["wall"] = finished - created
        out["other"] = max(0.0, out["wall"] - sum(out[p] for p in PHASES if p != "other"))
    else:
        out.pop("other")
    return {k: round(v, 1) for k, v in out.items()}


def phase_line(times: dict[str, float]) -> str:
    """One line: the wall time, then each phase's share of it."""
    def t(s: float) -> str:
        return f"{s / 60:.1f} min" if s >= 60 else f"{s:.0f} s"
    parts = ", ".join(f"{p} {t(times[p])}" for p in PHASES if times.get(p))
    return (f"time: {t(times['wall'])} in all: " if "wall" in times else "time: ") + parts
