"""Runtime evidence per sweep point: the CPU seconds each process spent (client, engine front end,
engine compute), the engine's page faults and context switches, the engine's own per-request
timings (queue, prefill, decode), its batch size, the prefill and decode work and the accepted
length under speculative decoding.

Readings are taken once at a point's start and once at its end (no sampling thread): the
difference is what the point cost. The arithmetic is pure; `read_processes` is the only I/O.
"""
from __future__ import annotations

import re

import psutil

from stackbook.engines import registry
from stackbook.engines.facts import MetricSeries, ProcessRole
from stackbook.measure.telemetry import histogram_mean_ms, process_group
from stackbook.measure.threads import http_threads, thread_times

# ------------------------------------------------------------------------------------ processes


def role_rule(name: str, cmdline: str = "", roles: tuple | None = None) -> ProcessRole | None:
    """The first of the kind's process roles (every kind's where none is given) a process matches
    by its name or command line; None where it matches none."""
    for rule in registry.process_roles() if roles is None else roles:
        if re.search(rule.pattern, name) or re.search(rule.pattern, cmdline):
            return rule
    return None


def process_role(name: str, cmdline: str = "", roles: tuple | None = None) -> str:
    """The role a process plays in an engine (role_rule's); a process matching none keeps its own name."""
    rule = role_rule(name, cmdline, roles)
    return rule.role if rule else re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "unnamed"


def _proc_faults(pid: int) -> tuple[int | None, int | None]:
    """(minor, major) page faults of one process from /proc/<pid>/stat (fields 10 and 12); None
    where there is no /proc (macOS)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None, None
    return int(fields[7]), int(fields[9])  # after "pid (comm)": state is field 3, minflt 10, majflt 12


def read_processes(pid: int | None, roles: tuple | None = None) -> dict:
    """One reading of the engine's process group (`pid` leads it) and of this client process:
    CPU seconds (user + system), page faults, context switches and threads, per process, each
    named by the engine kind's process `roles`."""
    me = psutil.Process()
    t = me.cpu_times()
    out: dict = {"client": {"cpu_s": t.user + t.system}, "engine": {}}
    if not pid:
        return out
    for p in process_group(pid, ("pid", "name", "cmdline")) or []:
        try:
            if p.info["pid"] == me.pid:
                continue
            with p.oneshot():
                c = p.cpu_times()
                ctx = p.num_ctx_switches()
                minor, major = _proc_faults(p.info["pid"])
                name = p.info["name"] or ""
                rule = role_rule(name, " ".join(p.info["cmdline"] or []), roles)
                out["engine"][p.info["pid"]] = {
                    "role": rule.role if rule else process_role(name, roles=()),
                    "cpu_s": c.user + c.system, "minor_faults": minor, "major_faults": major,
                    "voluntary_ctx_switches": ctx.voluntary, "involuntary_ctx_switches": ctx.involuntary,
                    "threads": p.num_threads()}
                split_http_threads(out["engine"], p.info["pid"], rule)
        except (ProcessLookupError, FileNotFoundError, PermissionError, psutil.Error):
            continue
    return out


def split_http_threads(engine: dict, pid: int, rule: ProcessRole | None) -> None:
    """Where the process's kind tells its HTTP threads apart, move their CPU seconds out of the
    process's reading into one of their own role (rule.http_role); its counters stay the process's.
    The main thread's seconds are kept beside (measure.slot_loop splits them by the engine's clock)."""
    if rule is None or rule.http_threads_born_within_s is None:
        return
    threads = thread_times(pid)
    if threads is None:
        return
    http = http_threads(threads, pid, rule.http_threads_born_within_s)
    seconds = sum(t.run_s for t in http)
    main = next((t.run_s for t in threads if t.tid == pid), None)
    if main is not None:
        engine[pid]["main_thread_s"] = main
    engine[pid]["cpu_s"] -= seconds
    engine[pid]["threads"] -= len(http)
    engine[f"{pid}.http"] = {"role": rule.http_role, "cpu_s": seconds, "threads": len(http),
                             **dict.fromkeys(HOST_COUNTERS, 0)}


HOST_COUNTERS = ("minor_faults", "major_faults", "voluntary_ctx_switches", "involuntary_ctx_switches")


def process_window(before: dict, after: dict) -> dict:
    """What a point cost between two readings: CPU seconds of the client and of each engine role
    (processes of one role summed; a process born during the point counts from zero), and the
    engine's page faults and context switches. Pure."""
    engine: dict[str, float] = {}
    counters = dict.fromkeys(HOST_COUNTERS, 0)
    threads: dict[str, int] = {}
    for pid, a in after.get("engine", {}).items():
        b = before.get("engine", {}).get(pid, {})
        engine[a["role"]] = engine.get(a["role"], 0.0) + a["cpu_s"] - b.get("cpu_s", 0.0)
        for k in HOST_COUNTERS:
            if counters[k] is not None and a.get(k) is not None:
                counters[k] += a[k] - (b.get(k) or 0)
            else:
                counters[k] = None  # not readable on this system: never a made-up zero
        threads[a["role"]] = threads.get(a["role"], 0) + a.get("threads", 0)
    out = {"cpu_seconds": {"client": round(after["client"]["cpu_s"] - before["client"]["cpu_s"], 4),
                           "engine": {k: round(v, 4) for k, v in sorted(engine.items())}}}
    if after.get("engine"):
        if all(v is not None for v in counters.values()):
            out["engine_host_counters"] = counters
        out["engine_threads"] = threads
    return out


# --------------------------------------------------------------------------- engine timings

def engine_time_from_histograms(delta: dict, series: MetricSeries) -> dict | None:
    """Mean queue, prefill, decode and inference time per request over a point (ms), from the
    engine's histogram _sum and _count increases (the phase histograms the arm's kind names); None
    where the engine exports none of them."""
    means, counts = {}, {}
    for phase, name in series.phase_histograms.items():
        means[phase], counts[phase] = histogram_mean_ms(delta, name)
    if all(m is None for m in means.values()):
        return None
    n = max(counts.values())
    return {**{p: round(means[p], 3) if means.get(p) is not None else None
               for p in ("queue", "prefill", "decode", "inference")},
            "requests": int(n) if n else None, "source": series.phase_source}


def engine_time_from_timings(timings: list[dict], series: MetricSeries) -> dict | None:
    """The same means from the per-request `timings` an engine's stream carries (prompt_ms is
    prefill, predicted_ms decode; no queue time), where the arm's kind states it sends them."""
    t = [x for x in timings if x and "prompt_ms" in x and "predicted_ms" in x]
    source = series.timings_source
    if not t or source is None:
        return None
    pre = sum(x["prompt_ms"] for x in t) / len(t)
    dec = sum(x["predicted_ms"] for x in t) / len(t)
    return {"queue": None, "prefill": round(pre, 3), "decode": round(dec, 3), "inference": round(pre + dec, 3),
            "requests": len(t), "source": source}


def queue_time_cv(delta: dict, series: MetricSeries) -> float | None:
    """CV of the engine's queue time over a point, from the buckets of its queue histogram."""
    if "queue" in series.phase_histograms:
        return histogram_cv(delta, series.phase_histograms["queue"])
    return None


def histogram_buckets(delta: dict, name: str) -> list[tuple[float, float]]:
    """(upper bound, cumulative count) of a histogram's bucket increases over a point, in order."""
    out = []
    for key, v in delta.items():
        if key.split("{", 1)[0].endswith(f"{name}_bucket"):
            m = re.search(r"le=([^,}]+)", key)
            if m:
                out.append((float(m.group(1)), v))
    return sorted(out)


def histogram_cv(delta: dict, name: str) -> float | None:
    """Coefficient of variation of a histogram's observations over a point, estimated from its
    buckets (each observation at its bucket's midpoint; the open last bucket at its lower edge).
    An estimate: as coarse as the buckets."""
    buckets = histogram_buckets(delta, name)
    counts, prev_le, prev_c = [], 0.0, 0.0
    for le, c in buckets:
        n = c - prev_c
        if n > 0:
            counts.append(((prev_le + le) / 2 if le != float("inf") else prev_le, n))
        prev_le, prev_c = (le if le != float("inf") else prev_le), c
    total = sum(n for _, n in counts)
    if total < 2:
        return None
    mean = sum(x * n for x, n in counts) / total
    var = sum(n * (x - mean) ** 2 for x, n in counts) / total
    return round(var ** 0.5 / mean, 4) if mean > 0 else None


def _counter(delta: dict, suffix: str) -> float | None:
    keys = [k for k in delta if k.split("{", 1)[0].endswith(suffix)]
    return sum(delta[k] for k in keys) if keys else None


def _first_counter(delta: dict, names: tuple[str, ...]) -> float | None:
    """The first of the arm's kind's counters of one kind of work the engine exported."""
    return next((v for name in names if (v := _counter(delta, name)) is not None), None)


def spec_decode(delta: dict, series: MetricSeries) -> dict | str:
    """Accepted length under speculative decoding: 1 + accepted draft tokens / drafts (the bonus
    token included: target-model steps saved per step), or why there is none."""
    def _spec_counter(what: str) -> float | None:
        name = series.spec_decode_counters.get(what)
        return _counter(delta, name) if name else None
    drafts = _spec_counter("drafts")
    accepted = _spec_counter("accepted_tokens")
    if drafts is None and accepted is None:
        return "not used: the engine exported no speculative-decoding counters"
    if not drafts:
        return "not used: no drafts proposed during this point"
    proposed = _spec_counter("draft_tokens")
    return {"drafts": int(drafts), "accepted_tokens": int(accepted or 0),
            "draft_tokens": int(proposed) if proposed is not None else None,
            "accepted_length_mean": round(1 + (accepted or 0) / drafts, 4),
            "acceptance_rate": round((accepted or 0) / proposed, 4) if proposed else None}


def _gauge_mean(gauges_during: dict | None, names: tuple[str, ...]) -> float | None:
    for key, v in (gauges_during or {}).items():
        if isinstance(v, dict) and key.split("{", 1)[0].endswith(names) and "{" not in key:
            return v["mean"]
    return None


def batch_size_mean(gauges_during: dict | None, series: MetricSeries) -> float | None:
    """N_batch: the mean of the engine's running-requests gauge while the point ran (the batch
    gauges the arm's kind names); None where it exports none."""
    return _gauge_mean(gauges_during, series.batch_gauges)


def waiting_mean(gauges_during: dict | None, series: MetricSeries | None = None) -> float | None:
    """The mean of the engine's waiting-requests gauge while the point ran (the queue gauges the
    arm's kind names; a point recorded without them is read with every kind's, each engine-prefixed);
    None where it exports none."""
    return _gauge_mean(gauges_during, series.queue_gauges if series else registry.series("queue_gauges"))


def work_tokens(delta: dict, records, series: MetricSeries) -> dict:
    """Prefill and decode work of a point (every request, warm-up and cool-down included): the
    engine's own token counters where it exports them, else the replies' usage counts."""
    ok = [r for r in records if r.ok]
    prompt = _first_counter(delta, series.prompt_token_counters)
    generated = _first_counter(delta, series.generated_token_counters)
    source = "engine counters" if prompt is not None and generated is not None else "replies' usage counts"
    if prompt is None:
        prompt = sum(r.prompt_tokens_server or r.prompt_tokens_client for r in ok)
    if generated is None:
        generated = sum(r.output_tokens_server if r.output_tokens_server is not None else r.output_tokens_client
                        for r in ok)
    cached = sum(r.cached_prompt_tokens or 0 for r in ok)
    return {"prompt_tokens": int(prompt), "generated_tokens": int(generated), "cached_prompt_tokens": int(cached),
            "source": source}


def tokens_per_step_mean(delta: dict, series: MetricSeries) -> float | None:
    """Tokens per engine step (the step histogram the arm's kind names): the batch in tokens."""
    if series.step_tokens_histogram:
        mean_ms, _ = histogram_mean_ms(delta, series.step_tokens_histogram)
        if mean_ms is not None:
            return round(mean_ms / 1000, 3)
    return None


def runtime_evidence(before: dict, after: dict, wall_s: float, delta: dict, records,
                     gauges_during: dict | None, series: MetricSeries) -> dict:
    """Every runtime field of one point, from the two process readings around it, the engine's
    metric increases, the point's records and the gauges sampled while it ran, each read by the
    names the arm's own kind gives its series. Pure."""
    done = [r for r in records if r.ok]
    timings = [r.engine_timings for r in records if r.ok and getattr(r, "engine_timings", None)]
    out = process_window(before, after)
    out.update({
        "cpu_window_s": round(wall_s, 4),
        "requests_in_cpu_window": len(done),
        "engine_time_ms": engine_time_from_histograms(delta, series) or engine_time_from_timings(timings, series),
        "queue_time_cv": queue_time_cv(delta, series),
        "batch_size_mean": batch_size_mean(gauges_during, series),
        "waiting_mean": waiting_mean(gauges_during, series),
        "tokens_per_step_mean": tokens_per_step_mean(delta, series),
        "work_tokens": work_tokens(delta, records, series),
        "spec_decode": spec_decode(delta, series),
    })
    return out
