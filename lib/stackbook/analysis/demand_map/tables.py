"""The demand maps as tables, units in the column names."""
from __future__ import annotations

import pandas as pd

from stackbook.analysis.demand_map.measured import ArmDemandMap


def centres_table(dmap: ArmDemandMap) -> pd.DataFrame:
    """The measured map in the seed map's format, units in the column names."""
    if not dmap.measured:
        return pd.DataFrame({"status": [dmap.status]}, index=pd.Index([dmap.arm], name="arm"))
    return pd.DataFrame([{"centre": c.centre, "V (visits/request)": c.visits, "S (ms/visit)": c.service_ms,
                          "D (ms/request)": c.demand_ms, "m (servers)": c.capacity, "D/m (ms)": c.adjusted_ms,
                          "bottleneck": c.centre == dmap.bottleneck, "why m": c.why_m, "measured from": c.source}
                         for c in dmap.centres]).set_index("centre")


def layers_table(demand: dict) -> pd.DataFrame:
    """The seed's illustrative map in the same format as a measured one."""
    return pd.DataFrame([{"layer": r["name"], "V (visits/request)": r["visits"], "S (ms/visit)": r["service_ms"],
                          "D (ms/request)": r["demand_ms"], "m (servers)": r["capacity"],
                          "D/m (ms)": r["adjusted_ms"], "bottleneck": r["name"] == demand["bottleneck"],
                          "why m": r["why_m"], "measured from": r["source"]}
                         for r in demand["layers"]]).set_index("layer")


def bound_table(maps: dict[str, ArmDemandMap]) -> pd.DataFrame:
    """Per arm: the bound beside the measured saturation throughput (and, where that throughput is
    above it, whether within the bound's interval), why not closer, and the response model with its
    error at its own point."""
    rows = []
    for name, d in maps.items():
        rows.append({"arm": name, "status": d.status, "demands from point": d.point, "bottleneck": d.bottleneck,
                     "bound (req/s)": d.bound_rps, "measured saturation (req/s)": d.measured_saturation_rps,
                     "at point": d.saturation_point, "measured / bound": d.measured_over_bound,
                     "bound interval (± share of the bound)": d.bound_interval,
                     "above the bound": d.bound_exceeded or ("no" if d.measured_over_bound is not None else None),
                     "batch size N_batch (mean)": d.batch_size_mean,
                     "unattributed at light load (ms)": d.unattributed_ms,
                     "engine start-up (s)": d.startup_s, "why not closer": d.why_not_closer,
                     "response model": d.load_model,
                     "model's mean E2E error at its own point (%)": d.own_point_error_pct})
    return pd.DataFrame(rows).set_index("arm") if rows else pd.DataFrame()


def mva_check_table(dmap: ArmDemandMap) -> pd.DataFrame:
    if not dmap.mva_check:
        return pd.DataFrame()
    return pd.DataFrame(dmap.mva_check).rename(columns={
        "measured_rps": "measured (req/s)", "predicted_rps": "predicted (req/s)", "rps_error_pct": "error (req/s, %)",
        "measured_e2e_ms": "measured mean E2E (ms)", "predicted_e2e_ms": "predicted mean E2E (ms)",
        "e2e_error_pct": "error (E2E, %)", "held_out": "held out of the fit"}).set_index(
        ["fit", "concurrency", "point"] if "point" in dmap.mva_check[0]
        else ["fit", "concurrency"])  # a point per repetition


def next_experiment_table(dmap: ArmDemandMap) -> pd.DataFrame:
    if not dmap.next_experiments:
        return pd.DataFrame()
    return pd.DataFrame(dmap.next_experiments).rename(columns={
        "adjusted_ms": "D/m now (ms)", "bound_gain_pct": "bound gain (%)",
        "response_change_pct": "mean E2E change at the load tested (%)", "at_load": "load tested",
        "expected_gain": "expected gain"}).set_index("rank")[
        ["change", "centre", "D/m now (ms)", "bound gain (%)", "mean E2E change at the load tested (%)",
         "expected gain", "confidence", "risk", "cost"]]
