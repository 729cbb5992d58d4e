"""The client against the engine's own clock: per point, the client's TTFT and inter-token means
beside the engine's histogram means over the same requests, with a verdict within a stated tolerance.

Each side is averaged the way the engine's histogram averages: TTFT once per request, the gap
between tokens once per gap. A per-request TPOT mean weighs a 2-token reply's one gap as much as a
500-token reply's 499, so on replies of mixed lengths it drifts from the engine's mean by the
workload's shape, not by any fault of either clock."""
from __future__ import annotations

from stackbook.engines.facts import MetricSeries
from stackbook.loadgen.records import RequestRecord
from stackbook.measure.metrics import request_metrics
from stackbook.measure.telemetry import histogram_mean_ms
from stackbook.measure.validity import RECONCILIATION_TOLERANCE


def reconcile_with_engine(delta: dict, records: list[RequestRecord], series: MetricSeries) -> dict:
    """The client's mean TTFT and TPOT for a point beside the engine's own histogram means over
    the same requests: every request the point sent (warm-up, sentinels and cool-down included),
    since the engine's histograms count them all. The engine's TTFT starts after its front end
    has parsed and tokenized the request. The histograms are the arm's own kind's. With the verdict
    (reconciliation_verdict)."""
    names = series.latency_histograms
    ttft_engine, n_engine = histogram_mean_ms(delta, names["ttft"]) if "ttft" in names else (None, 0)
    itl_engine, _ = histogram_mean_ms(delta, names["itl"]) if "itl" in names else (None, 0)
    if ttft_engine is None and itl_engine is None:
        return {"engine_histograms": "not exported by this engine", "verdict": "not available"}
    rows = [request_metrics(r) for r in records if r.ok and r.first_token_s is not None]
    client_ttft = _mean([x["ttft_ms"] for x in rows])
    client_tpot = _mean([x["tpot_ms"] for x in rows if x["tpot_ms"] is not None])
    client_itl = gap_weighted_itl_ms(rows)

    def ratio(a, b):
        return round(a / b, 4) if a and b else None

    def rounded(x):
        return round(x, 3) if x is not None else None

    out = {
        "requests_client": len(rows), "requests_engine": int(n_engine),
        "ttft_ms_client_mean": rounded(client_ttft), "ttft_ms_engine_mean": rounded(ttft_engine),
        "ttft_ratio_client_over_engine": ratio(client_ttft, ttft_engine),
        "tpot_ms_client_mean": rounded(client_tpot), "itl_ms_engine_mean": rounded(itl_engine),
        "tpot_ratio_client_over_engine_itl": ratio(client_tpot, itl_engine),
        "itl_ms_client_mean": rounded(client_itl),
        "itl_ratio_client_over_engine": ratio(client_itl, itl_engine),
    }
    return out | reconciliation_verdict(out)


def gap_weighted_itl_ms(rows: list[dict]) -> float | None:
    """The client's mean gap between output tokens, each gap counted once (as the engine's ITL
    histogram counts them): the replies' decode times summed over their gaps summed."""
    decoding = [x for x in rows if x["tpot_ms"] is not None]
    gaps = sum(x["output_tokens"] - 1 for x in decoding)
    return sum(x["e2e_ms"] - x["ttft_ms"] for x in decoding) / gaps if gaps else None


def decode_ratio(r: dict) -> tuple[float | None, str]:
    """The client's decode mean over the engine's ITL mean, and what it compares: the gap-weighted
    mean where recorded; a run recorded before it has only the per-request TPOT mean."""
    if "itl_ratio_client_over_engine" in r:
        return r["itl_ratio_client_over_engine"], "gap-weighted inter-token latency"
    return r.get("tpot_ratio_client_over_engine_itl"), "per-request TPOT (recorded before the gap-weighted mean)"


def reconciliation_verdict(r: dict, tolerance: float = RECONCILIATION_TOLERANCE) -> dict:
    """PASS when the client's TTFT and inter-token means are each within the tolerance of the
    engine's over the same requests; FAIL with the likely cause otherwise; "not available" when the
    engine exports no histograms. Pure: applies as well to a reconciliation recorded before verdicts."""
    if r.get("engine_histograms") or r.get("requests_engine") is None:
        return {"verdict": "not available", "tolerance": tolerance,
                "likely_cause": "the engine exports no latency histograms"}
    decode, basis = decode_ratio(r)
    checks = {"ttft": r.get("ttft_ratio_client_over_engine"), "tpot": decode}
    within = {k: None if v is None else abs(v - 1) <= tolerance for k, v in checks.items()}
    out = {"tolerance": tolerance, "ttft_verdict": _pass(within["ttft"]), "tpot_verdict": _pass(within["tpot"]),
           "decode_compared": basis}
    if r["requests_engine"] != r["requests_client"]:
        return out | {"verdict": "FAIL", "likely_cause": (
            f"not like with like: the engine's histograms counted {r['requests_engine']} requests, the client "
            f"{r['requests_client']} (requests outside the point's records, e.g. probes, entered the engine's delta)")}
    if all(within.values()):
        return out | {"verdict": "PASS", "likely_cause": None}
    if None in within.values() and not any(v is False for v in within.values()):
        return out | {"verdict": "not available", "likely_cause": "one side of a mean is missing"}
    causes = []
    if within["ttft"] is False:
        gap = r["ttft_ms_client_mean"] - r["ttft_ms_engine_mean"]
        causes.append(f"the client's TTFT is {gap:+.1f} ms from the engine's" + (
            ": time before the engine's clock starts (HTTP, chat template, tokenization in its front end)"
            if gap > 0 else ": the engine's clock starts before the client sent (its queue or a retry)"))
    if within["tpot"] is False:
        causes.append(f"the client's {basis} is {checks['tpot']:.3f}x the engine's inter-token latency: tokens "
                      "arrive in chunks of more than one, or the client's event loop read some late")
    return out | {"verdict": "FAIL", "likely_cause": "; ".join(causes)}


def _pass(ok: bool | None) -> str:
    return "not available" if ok is None else "PASS" if ok else "FAIL"


def arm_reconciliation(points: dict) -> dict:
    """An arm's verdict over its points (FAIL if any point failed, PASS if every available one
    passed, else not available) and each point's verdict, judged anew from its recorded means
    (a run recorded before verdicts gets them too)."""
    per_point = {}
    for name, s in points.items():
        r = s.get("engine_reconciliation") or {"engine_histograms": "not recorded"}
        v = reconciliation_verdict(r)
        per_point[name] = {"verdict": v["verdict"], "likely_cause": v.get("likely_cause"),
                           "ttft_ratio": r.get("ttft_ratio_client_over_engine"),
                           "tpot_ratio": r.get("tpot_ratio_client_over_engine_itl"),
                           "requests_client": r.get("requests_client"), "requests_engine": r.get("requests_engine")}
        if "itl_ratio_client_over_engine" in r:
            per_point[name]["itl_ratio"] = r["itl_ratio_client_over_engine"]
    verdicts = {p["verdict"] for p in per_point.values()}
    overall = "FAIL" if "FAIL" in verdicts else "PASS" if "PASS" in verdicts else "not available"
    rule = (f"client TTFT and TPOT means within {RECONCILIATION_TOLERANCE:.0%} of the engine's histogram means "
            "over the same requests")
    if any("itl_ratio" in p for p in per_point.values()):
        rule += ", the TPOT mean taken per gap between tokens as the engine's ITL histogram takes it"
    return {"verdict": overall, "tolerance": RECONCILIATION_TOLERANCE, "rule": rule, "points": per_point}


def reconciliation_rows(arms: dict) -> list[dict]:
    """One row per arm and point of a run (arms as comparison.load_run gives them), for analysis.json."""
    rows = []
    for name, a in arms.items():
        sweep = (a.get("results") or {}).get("sweep")
        if not sweep:
            continue
        for point, v in arm_reconciliation(sweep.get("points") or {})["points"].items():
            rows.append({"arm": name, "point": point, **v})
    return rows


def _mean(values: list) -> float | None:
    return sum(values) / len(values) if values else None
