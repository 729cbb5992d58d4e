"""What a point says about the replicas and the router, from readings taken at its start and end:
each replica's share of the requests, the imbalance, the prefill each replica did against what it
was sent (its realized prefix hits) and its busy fraction. Pure: routing.routed does the reading.

Which figures are measured and which inferred is stated beside each: a router that counts its
outcomes per replica gives exact shares; where it keeps none (the client's own round robin), a
replica's requests are inferred from the tokens it generated."""
from __future__ import annotations

import statistics

CUMULATIVE = ("_total", "_count", "_sum", "_bucket")


def counter_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Every series' increase over a point (counters) or its value at the end (gauges)."""
    return {k: (v - before.get(k, 0.0) if k.split("{", 1)[0].endswith(CUMULATIVE) else v) for k, v in after.items()}


def series_total(delta: dict[str, float], fragments: tuple[str, ...]) -> float | None:
    """The sum of the series whose name ends with the first fragment any series carries (an
    engine kind's counter names, as its MetricSeries states them); None where none does."""
    for fragment in fragments:
        values = [v for k, v in delta.items() if k.split("{", 1)[0].endswith(fragment)]
        if values:
            return sum(values)
    return None


def summed(readings: list[dict[str, float]]) -> dict[str, float]:
    """Several replicas' expositions as one: each series summed over the replicas (counters and
    the running-requests gauges alike), so a point's engine figures describe the deployment."""
    out: dict[str, float] = {}
    for reading in readings:
        for k, v in reading.items():
            out[k] = out.get(k, 0.0) + v
    return out


def imbalance(counts: list[float]) -> float | None:
    """The busiest replica's count over the mean (1: perfectly even; N: one replica took all)."""
    mean = sum(counts) / len(counts) if counts else 0
    return round(max(counts) / mean, 4) if mean else None


def shares(counts: list[float]) -> list[float | None]:
    total = sum(counts)
    return [round(c / total, 4) if total else None for c in counts]


def requests_by_tokens(generated: list[float | None], completed: int) -> list[float] | None:
    """Each replica's requests inferred from the tokens it generated, where every reply has the
    same forced length: completed requests split in proportion."""
    if not completed or any(g is None for g in generated) or not sum(generated):
        return None
    return [completed * g / sum(generated) for g in generated]


def replica_figures(deltas: list[dict], cpu_s: list[float | None], wall_s: float, threads: int, series,
                    served: list[float] | None, served_source: str, completed: int,
                    prompt_tokens_sent: int | None) -> dict:
    """Per replica: requests (and where they were read), share, prompt tokens computed and served
    from its cache, tokens generated, CPU seconds and busy fraction; then the imbalance and each
    replica's realized prefix hits (from its own cache counter where its kind exports one, else
    inferred: its requests at the point's mean prompt length, against what it computed)."""
    computed = [series_total(d, series.prompt_token_counters) for d in deltas]
    cached = [series_total(d, series.cache_hit_counters) for d in deltas]
    generated = [series_total(d, series.generated_token_counters) for d in deltas]
    if served is None:
        served = requests_by_tokens(generated, completed)
        served_source = "inferred from each replica's generated tokens (replies of one forced length)"
    mean_prompt = prompt_tokens_sent / completed if prompt_tokens_sent and completed else None
    rows = []
    for i, d in enumerate(deltas):
        if cached[i] is not None and computed[i] is not None:  # the replica's own counters: measured
            hit = round(cached[i] / (cached[i] + computed[i]), 4) if cached[i] + computed[i] else None
        else:
            sent = served[i] * mean_prompt if served is not None and mean_prompt else None
            hit = round(1 - computed[i] / sent, 4) if sent and computed[i] is not None else None
        busy = round(cpu_s[i] / (threads * wall_s), 4) if cpu_s[i] is not None and wall_s > 0 else None
        rows.append({"replica": i, "requests": round(served[i], 2) if served is not None else None,
                     "prompt_tokens_computed": computed[i], "generated_tokens": generated[i],
                     "prompt_tokens_cached": cached[i], "cpu_s": cpu_s[i], "busy_fraction_cpu": busy,
                     "prefix_hit_rate": hit})
    counts = [r["requests"] for r in rows] if served is not None else None
    return {"replicas": rows, "requests_source": served_source,
            "request_shares": shares(counts) if counts else None,
            "imbalance_max_over_mean": imbalance(counts) if counts else None,
            "busy_fraction_source": f"CPU seconds over {threads} thread(s) x the point's wall time",
            "prefix_hit_rate_source": (
                "measured: each replica's cached prompt tokens over cached and computed (its own counters)"
                if all(c is not None for c in cached) else
                "inferred: 1 - the prompt tokens a replica computed (its own counter) over its requests x the "
                "point's mean prompt length")}


def added_latency(direct_s: list[float], routed_s: list[float]) -> dict | None:
    """The router's added time per request, measured idle: the same tiny request sent alternately
    straight to a replica and through the router, medians compared (a difference inside the
    spread says the router's time is not measurable here)."""
    if not direct_s or not routed_s:
        return None
    d, r = statistics.median(direct_s), statistics.median(routed_s)
    spread = (statistics.quantiles(direct_s, n=4)[2] - statistics.quantiles(direct_s, n=4)[0]
              if len(direct_s) >= 4 else None)
    return {"direct_ms_median": round(1000 * d, 3), "routed_ms_median": round(1000 * r, 3),
            "added_ms": round(1000 * (r - d), 3),
            "direct_ms_iqr": round(1000 * spread, 3) if spread is not None else None,
            "requests_each_way": len(direct_s),
            "how": "inferred: medians of the same one-token request sent alternately to replica 0 and through the "
                   "router while idle, before the sweep"}
