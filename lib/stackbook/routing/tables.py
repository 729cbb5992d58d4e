"""The routing evidence as the sweep notebook shows it: one row per point and replica, then one
per point for the router; empty for an arm of one engine (its section then folds away)."""
from __future__ import annotations

import pandas as pd


def replicas_table(sweep: dict) -> pd.DataFrame:
    """Per point and replica: requests and share, prompt tokens computed, busy fraction, prefix hits."""
    rows = []
    for point, p in (sweep.get("points") or {}).items():
        r = p.get("routing")
        if not r:
            continue
        shares = r.get("request_shares") or [None] * len(r["replicas"])
        for row, share in zip(r["replicas"], shares):
            rows.append({"point": point, "replica": row["replica"], "requests": row["requests"], "share": share,
                         "prompt tokens computed": row["prompt_tokens_computed"],
                         "tokens generated": row["generated_tokens"], "CPU (s)": row["cpu_s"],
                         "busy fraction (CPU)": row["busy_fraction_cpu"],
                         "prompt tokens cached": row.get("prompt_tokens_cached"),
                         "prefix hit rate": row["prefix_hit_rate"],
                         "imbalance (max/mean)": r.get("imbalance_max_over_mean")})
    return pd.DataFrame(rows).set_index(["point", "replica"]) if rows else pd.DataFrame()


def router_table(sweep: dict) -> pd.DataFrame:
    """Per point: the router, its policy and what it counted (retries, failures, status codes)."""
    rows = {}
    for point, p in (sweep.get("points") or {}).items():
        r = p.get("routing")
        if not r:
            continue
        counts = r.get("router_counts") or {}
        rows[point] = {"router": f"{r['router']} ({r['policy']})", "requests read from": r.get("requests_source"),
                       **{k.replace("_", " "): v for k, v in counts.items()},
                       "realized hit rate (replies)": r.get("realized_hit_rate_reported"),
                       "implied hit rate (one infinite cache)": r.get("implied_hit_rate"),
                       "router added ms (idle, inferred)": (r.get("router_added_latency") or {}).get("added_ms")}
    return pd.DataFrame(rows).T
