"""Campaign-level analysis: load a run, check fairness, compare arms, state a verdict."""
from __future__ import annotations

import os
from typing import Any

import pandas as pd

from stackbook.analysis.demand_map import ArmDemandMap, demand_maps_of
from stackbook.measure.reconciliation import reconciliation_rows
from stackbook.analysis.fairness import fairness_table
from stackbook.analysis.open_loop_waits import open_loop_points
from stackbook.config.loading import load_campaign
from stackbook.evidence.files import read_json, write_model
from stackbook.evidence.label import Label
from stackbook.evidence.results import ArmResults, Open
from stackbook.evidence.rundir import STAGE_NOTEBOOK, ArmDir, RunDir
from stackbook.loadgen.records import read_records
from stackbook.measure.metrics import requests_frame


def load_run(run_dir: str | os.PathLike | RunDir) -> tuple:
    """(campaign, {arm: {arm, dir, engine, results, passport, requests, status}}) for a run
    directory; status is the arm's status in the manifest (e.g. engine_died)."""
    run = run_dir if isinstance(run_dir, RunDir) else RunDir.existing(run_dir)
    campaign = load_campaign(run.campaign_resolved)
    manifest_arms = (read_json(run.manifest, {}) or {}).get("arms", {})
    arms = {}
    for arm in campaign.arms:
        d = run.arm(arm.name)
        if not d.exists():
            continue
        arms[arm.name] = {
            "arm": arm, "dir": d,
            "engine": read_json(d.engine_json, {}) or {},
            "results": read_json(d.results, {}) or {},
            "passport": read_json(d.passport_json, {}) or {},
            "requests": requests_frame(read_records(d.requests)),
            "status": manifest_arms.get(arm.name, {}).get("status"),
        }
    return campaign, arms


def arm_labels(arms: dict, fairness: pd.DataFrame | None = None) -> dict[str, Label]:
    """Each arm's label from its typed results, its manifest status and, when given, the
    fairness check (the rule itself is evidence.label.arm_label)."""
    comparable = dict(fairness["comparable"]) if fairness is not None and not fairness.empty else {}
    return {name: ArmResults.model_validate(a["results"]).label(
                engine_died=a.get("status") == "engine_died", comparable=bool(comparable.get(name, True)))
            for name, a in arms.items()}


def comparison_frame(arms: dict, fairness: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per arm and point, with the arm's label (fairness included when given)."""
    rows = []
    labels = arm_labels(arms, fairness)
    for name, a in arms.items():
        sweep = a["results"].get("sweep")
        label = labels[name].value
        if not sweep:
            continue
        rules = discard_rules_by_point(sweep)
        for point, s in sweep["points"].items():
            rows.append({"arm": name, "label": label, "point": point, "discarded": bool(s.get("discarded")),
                         **{k: v for k, v in s.items() if not isinstance(v, (dict, list)) and k != "discarded"},
                         "discard_rule": rules.get(point)})
    df = pd.DataFrame(rows)
    if not df.empty:
        df["status"] = [point_status(r["label"], r["discarded"], r["discard_rule"]) for _, r in df.iterrows()]
    return df


def discard_rules_by_point(sweep: dict) -> dict[str, str]:
    """Per discarded point, the preregistered rule(s) that discarded it, with their detail."""
    out: dict[str, list[str]] = {}
    for d in sweep.get("discards") or []:
        out.setdefault(d["point"], []).append(f"{d['rule']}: {d['detail']}")
    return {p: "; ".join(v) for p, v in out.items()}


def point_status(label: str, discarded: bool, rule: str | None = None) -> str:
    """What a point is in the ranking: 'accepted' (ranked), or why it is shown but kept out (the
    discard rule, or the arm's label)."""
    if discarded:
        return f"discarded ({rule})" if rule else "discarded"
    return Label.ACCEPTED.value if label == Label.ACCEPTED.value else str(label)


def rankable(df: pd.DataFrame) -> pd.DataFrame:
    """The points that may enter the frontier, the SLO capacity and the verdict: accepted arms,
    points no preregistered rule discarded. Tables and figures show the rest, marked."""
    if df.empty:
        return df
    keep = df["label"] == Label.ACCEPTED.value
    if "discarded" in df:
        keep &= ~df["discarded"].fillna(False).astype(bool)
    return df[keep]


def discards_frame(arms: dict) -> pd.DataFrame:
    rows = [{"arm": name, **d} for name, a in arms.items() for d in (a["results"].get("sweep") or {}).get("discards", [])]
    return pd.DataFrame(rows)


def headline(df: pd.DataFrame) -> pd.DataFrame:
    """One row per arm and concurrency: the figures a reader compares first."""
    if df.empty:
        return df
    cols = ["arm", "label", "status", "discarded", "discard_rule", "load", "concurrency", "rate", "completed", "ttft_ms_p50", "ttft_ms_p99",
            "ttft_ms_mean", "ttft_ms_ci95", "tpot_ms_p50", "tpot_ms_mean", "tpot_ms_ci95", "e2e_ms_p50", "e2e_ms_p95",
            "e2e_ms_p99", "e2e_ms_mean", "e2e_ms_ci95", "output_throughput_tok_s", "goodput_rps", "slo_attainment"]
    return df[[c for c in cols if c in df.columns]].sort_values(["load", "arm"]).round(2).reset_index(drop=True)


def verdict(df: pd.DataFrame, fairness: pd.DataFrame, slo) -> list[str]:
    """Plain-language findings, with their caveats. Only accepted, comparable arms are ranked; every
    other label is named with its reason."""
    if df.empty:
        return ["No arm produced measurements."]
    lines = []
    ok_arms = set(fairness.index[fairness["comparable"]]) if not fairness.empty else set(df["arm"])
    for label in Label:
        if label in (Label.ACCEPTED, Label.NOT_COMPARABLE):
            continue  # comparability has its own line below, from the fairness table
        held = sorted(set(df.loc[df["label"] == label.value, "arm"]))
        if held:
            lines.append(f"Not ranked ({label.reason}): {', '.join(held)}.")
    unfair = sorted(set(df["arm"]) - ok_arms)
    if unfair:
        lines.append(f"Not comparable (protocol differs): {', '.join(unfair)}.")
    if df["discarded"].any():
        lines.append(f"Discarded by preregistered rules (kept on disk, not ranked): "
                     f"{', '.join(df.loc[df['discarded'], 'arm'] + ' ' + df.loc[df['discarded'], 'point'])}.")
    ranked = rankable(df)
    ranked = ranked[ranked["arm"].isin(ok_arms)]
    if ranked["arm"].nunique() < 2:
        lines.append("Fewer than two accepted, comparable arms: no ranking.")
        return lines
    unit = "concurrency" if not ("rate" in ranked and ranked["rate"].notna().any()) else "offered rate"
    for c, grp in ranked.groupby("load"):
        if grp["arm"].nunique() < 2:
            left = df[(df["load"] == c) & ~df["arm"].isin(grp["arm"])]
            lines.append(f"At {unit} {c:g}: only {', '.join(sorted(set(grp['arm'])))} has a ranked point; not "
                         "compared" + (": " + "; ".join(f"{r['arm']} {r['point']} {r['status']}"
                                                      for _, r in left.iterrows()) if "status" in left and len(left)
                                       else "") + ".")
            continue
        best_tp = grp.loc[grp["output_throughput_tok_s"].idxmax()]
        best_tail = grp.loc[grp["e2e_ms_p99"].idxmin()]
        within = grp[grp["slo_attainment"] >= 0.99]
        s = (f"At {unit} {c:g}: highest output throughput {best_tp['arm']} "
             f"({best_tp['output_throughput_tok_s']:.1f} tok/s); lowest p99 E2E {best_tail['arm']} "
             f"({best_tail['e2e_ms_p99']:.0f} ms); meeting the SLO (TTFT <= {slo.ttft_ms:.0f} ms, "
             f"TPOT <= {slo.tpot_ms:.0f} ms) for 99% of requests: "
             f"{', '.join(within['arm']) if len(within) else 'no arm'}.")
        if best_tp["arm"] != best_tail["arm"]:
            other = grp[grp["arm"] == best_tp["arm"]].iloc[0]
            ratio = other["e2e_ms_p99"] / best_tail["e2e_ms_p99"]
            s += (f" The throughput winner's p99 E2E is {ratio:.2f}x the best: for an interactive product "
                  "the tail decides.")
        lines.append(s)
    return lines


def sizing_frame(arms: dict) -> pd.DataFrame:
    """Per arm: the arithmetic's live sequences beside the engine's own accounting of the pool."""
    rows = []
    for name, a in arms.items():
        s = a["results"].get("sizing")
        if not s or "max_live_sequences" not in s:
            continue
        pred, real = s.get("predicted_capacity", {}), s.get("realized_capacity", {})
        rows.append({"arm": name, "engine": a["arm"].engine.kind,
                     "weights GiB": round(s["weights_bytes"] / 2**30, 2),
                     "KV B/token": s["kv_bytes_per_token"],
                     "state MB/seq": round(s["state_bytes_per_sequence"] / 1e6, 1),
                     "pool GiB": round(s["cache_pool_bytes"] / 2**30, 2),
                     "live sequences (arithmetic)": s["max_live_sequences"],
                     "max concurrency (engine rule)": pred.get("max_concurrency"),
                     "max concurrency (engine reported)": real.get("max_concurrency")})
    return pd.DataFrame(rows).set_index("arm") if rows else pd.DataFrame()


def pareto_frontier(df: pd.DataFrame) -> pd.DataFrame:
    """Points no other ranked point beats on both throughput (higher) and p99 E2E (lower);
    discarded points and arms that are not accepted never enter it."""
    pts = rankable(df)[["arm", "load", "output_throughput_tok_s", "e2e_ms_p99"]].dropna()
    keep = []
    for i, p in pts.iterrows():
        dominated = ((pts["output_throughput_tok_s"] >= p["output_throughput_tok_s"]) &
                     (pts["e2e_ms_p99"] <= p["e2e_ms_p99"]) &
                     ((pts["output_throughput_tok_s"] > p["output_throughput_tok_s"]) |
                      (pts["e2e_ms_p99"] < p["e2e_ms_p99"]))).any()
        if not dominated:
            keep.append(i)
    return pts.loc[keep].sort_values("output_throughput_tok_s").reset_index(drop=True)


def slo_capacity(df: pd.DataFrame, attainment: float = 0.99) -> pd.DataFrame:
    """Per arm: the highest load tested at which at least `attainment` of requests met the SLO,
    and the goodput there. Only ranked points count (a discarded point, or any point of an arm
    that is not accepted, is never its capacity); every arm keeps its row."""
    rows = []
    ranked = rankable(df)
    for arm, g in df.groupby("arm"):
        r = ranked[ranked["arm"] == arm]
        ok = r[r["slo_attainment"] >= attainment].sort_values("load")
        best = ok.iloc[-1] if len(ok) else None
        rows.append({"arm": arm, "label": g["label"].iloc[0],
                     "max load inside the SLO": best["load"] if best is not None else None,
                     "goodput there (req/s)": round(best["goodput_rps"], 3) if best is not None else None,
                     "output tok/s there": round(best["output_throughput_tok_s"], 1) if best is not None else None,
                     "highest load tested": g["load"].max(),
                     "points left out": ", ".join(f"{p} ({st})" for p, st in zip(g["point"], g["status"])
                                                  if st != Label.ACCEPTED.value) if "status" in g else ""})
    return pd.DataFrame(rows).set_index("arm") if rows else pd.DataFrame()


def roofline_efficiency(arms: dict, df: pd.DataFrame) -> pd.DataFrame:
    """Measured single-stream decode rate (concurrency 1) as a share of the bandwidth bound."""
    rows = []
    for name, a in arms.items():
        bound = (a["results"].get("sizing") or {}).get("roofline_decode_tok_s")
        one = df[(df["arm"] == name) & (df.get("concurrency") == 1)] if "concurrency" in df else df.iloc[0:0]
        if not bound or one.empty:
            continue
        rate = one["decode_tok_s_per_stream_mean"].iloc[0]
        rows.append({"arm": name, "decode tok/s (c=1)": round(rate, 1),
                     "± 95% CI": round(one["decode_tok_s_per_stream_ci95"].iloc[0] or 0, 1),
                     "bandwidth bound tok/s": round(bound, 1), "% of bound": round(100 * rate / bound, 1)})
    return pd.DataFrame(rows).set_index("arm") if rows else pd.DataFrame()


def queueing_fits(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per arm: the closed-loop model fitted on the lightest and heaviest points, its predictions
    at every tested load, and its error on the points held out of the fit."""
    from stackbook.analysis.queueing import fit_closed_loop, held_out_error

    curves, errors = [], []
    if "concurrency" not in df or df["concurrency"].isna().all():
        return pd.DataFrame(), pd.DataFrame()  # the closed-network model needs a closed-loop sweep
    for arm, g in df.groupby("arm"):
        pts = [{"concurrency": int(r["concurrency"]), "throughput_rps": r["request_throughput_rps"],
                "response_s": r["e2e_ms_mean"] / 1000} for _, r in g.sort_values("concurrency").iterrows()
               if r.get("request_throughput_rps") and r.get("e2e_ms_mean")]
        if len(pts) < 2:
            continue
        fit = fit_closed_loop([pts[0], pts[-1]])
        for c in range(1, max(p["concurrency"] for p in pts) + 1):
            p = fit.predict(c)
            measured = next((x for x in pts if x["concurrency"] == c), None)
            curves.append({"arm": arm, "concurrency": c, "predicted_e2e_ms": p["response_s"] * 1000,
                           "measured_e2e_ms": measured["response_s"] * 1000 if measured else None,
                           "queue_demand_ms": fit.queue_demand_s * 1000, "delay_demand_ms": fit.delay_demand_s * 1000})
        errors += [{"arm": arm, **row} for row in held_out_error(pts)]
    return pd.DataFrame(curves), pd.DataFrame(errors)


def canary_agreement(arms: dict) -> pd.DataFrame:
    """Greedy outputs of the same canary prompts across arms: identical text means the arms
    compute the same function (the first arm is the reference)."""
    outputs: dict[str, dict[str, str]] = {}
    for name, a in arms.items():
        for r in (a["results"].get("canaries") or {}).get("results", []):
            if r["kind"] in ("needle",):
                continue
            outputs.setdefault(r["id"], {})[name] = r.get("output") or ""
    rows = []
    names = list(arms)
    for check, per_arm in outputs.items():
        if len(per_arm) < 2:
            continue
        ref = per_arm.get(names[0])
        rows.append({"check": check, **{n: (per_arm.get(n) or "")[:60] for n in names},
                     "identical to " + names[0]: all(v == ref for v in per_arm.values())})
    return pd.DataFrame(rows).set_index("check") if rows else pd.DataFrame()


def remote_arms(arms: dict) -> list[str]:
    return [n for n, a in arms.items() if a["engine"].get("remote")]


def campaign_summary(campaign, arms: dict) -> str:
    """The campaign, its arms and engines, remote endpoints, and links to each arm's evidence
    (relative to the run directory, where the analysis notebook is written), as Markdown."""
    lines = [f"**Campaign** `{campaign.name}`: {campaign.description}  \n**Arms:** "
             + ", ".join(f"`{n}` ({a['arm'].engine.kind})" for n, a in arms.items())]
    remote = remote_arms(arms)
    if remote:
        lines.append(f"**Remote endpoints:** {', '.join(remote)}: their latencies include the network path.")
    def links(d: ArmDir) -> str:
        evidence = [("sizing", d.notebook(STAGE_NOTEBOOK["sizing"])), ("canaries", d.notebook(STAGE_NOTEBOOK["canaries"])),
                    ("sweep", d.notebook(STAGE_NOTEBOOK["sweep"])), ("raw requests", d.requests),
                    ("engine log", d.engine_log), ("passport", d.passport_md)]
        return ", ".join(f"[{what}]({d.link(path)})" for what, path in evidence if path.exists())  # a stage not run has no file
    lines.append("Evidence per arm: " + "; ".join(f"`{n}`: {links(a['dir'])}" for n, a in arms.items()))
    return "\n\n".join(lines)


def gate_table(arms: dict) -> pd.DataFrame:
    """Per arm: the canary verdict and tally, and the KV capacity predicted against what the
    engine allocated."""
    rows = []
    for n, a in arms.items():
        c = a["results"].get("canaries", {})
        sz = a["results"].get("sizing", {})
        realized = sz.get("realized_capacity", {})
        rows.append({"arm": n, "canaries": c.get("verdict", "not run"),
                     "gating passed": f"{c.get('passed', 0)}/{c.get('gating_checks', 0)}",
                     "out of scope": ", ".join(c.get("out_of_scope", {})) or "-",
                     "KV tokens predicted": sz.get("predicted_capacity", {}).get("kv_tokens"),
                     "KV tokens realized": realized.get("kv_tokens"),
                     "max concurrency (engine)": realized.get("max_concurrency"),
                     "engine ready after (s)": round(a["engine"].get("ready_after_s") or 0, 1)})
    return pd.DataFrame(rows).set_index("arm")


def passports(arms: dict) -> list[str]:
    """Each arm's passport.md, or a line saying the arm did not run."""
    return [a["dir"].passport_md.read_text() if a["dir"].passport_md.exists()
            else f"*{n}: no passport (the arm did not run)*" for n, a in arms.items()]


class ArmAnalysis(Open):
    engine: str
    label: Label
    comparable: bool
    differs: list[str]
    points_ranked: list[str] = []
    points_left_out: dict[str, str] = {}  # point -> why it is shown but not ranked (discard rule or label)


RANKING_RULE = ("Only points of accepted, comparable arms that no preregistered rule discarded enter the "
                "Pareto frontier, the SLO capacity and the verdict; the others are listed with their status.")


class CampaignAnalysis(Open):
    """analysis.json: the campaign analysis as data (the notebook beside it shows the same)."""
    campaign: str
    arms: dict[str, ArmAnalysis]
    fairness: list[dict[str, Any]]
    points: list[dict[str, Any]]
    discards: list[dict[str, Any]]
    pareto_frontier: list[dict[str, Any]]
    slo_capacity: list[dict[str, Any]]
    verdict: list[str]
    ranking_rule: str = RANKING_RULE
    demand_maps: dict[str, ArmDemandMap] = {}
    open_loop_waits: list[dict[str, Any]] = []
    reconciliation: list[dict[str, Any]] = []  # per arm and point: client against engine, with a verdict


def _records(df: pd.DataFrame) -> list[dict]:
    """A table as JSON rows; a missing value is null."""
    if df is None or df.empty:
        return []
    return df.astype(object).where(df.notna(), None).to_dict("records")


def analyse_run(run_dir: str | os.PathLike | RunDir) -> CampaignAnalysis:
    """Fairness, labels, the side-by-side points, the frontier, SLO capacity and the verdict."""
    campaign, arms = load_run(run_dir)
    fair = fairness_table(campaign, arms)
    labels = arm_labels(arms, fair)
    df = comparison_frame(arms, fair)
    differs = fair.filter(like="differs_from_").iloc[:, 0] if not fair.empty else pd.Series(dtype=object)

    def status_of(n: str) -> dict[str, str]:
        mine = df[df["arm"] == n] if not df.empty else df
        return dict(zip(mine["point"], mine["status"])) if not mine.empty else {}

    return CampaignAnalysis(
        campaign=campaign.name,
        arms={n: ArmAnalysis(engine=a["arm"].engine.kind, label=labels[n],
                             comparable=bool(fair.loc[n, "comparable"]) if n in fair.index else True,
                             differs=[c for c in str(differs.get(n) or "").split(", ") if c],
                             points_ranked=[p for p, st in status_of(n).items() if st == Label.ACCEPTED.value],
                             points_left_out={p: st for p, st in status_of(n).items() if st != Label.ACCEPTED.value})
              for n, a in arms.items()},
        fairness=_records(fair.reset_index()) if not fair.empty else [],
        points=_records(headline(df)),
        discards=_records(discards_frame(arms)),
        pareto_frontier=_records(pareto_frontier(df)) if not df.empty else [],
        slo_capacity=_records(slo_capacity(df).reset_index()) if not df.empty else [],
        verdict=verdict(df, fair, campaign.protocol.slo), ranking_rule=RANKING_RULE,
        demand_maps=demand_maps_of(arms, labels),
        open_loop_waits=_records(open_loop_points(campaign, arms, df)),
        reconciliation=reconciliation_rows(arms))


def write_analysis(run_dir: str | os.PathLike | RunDir) -> CampaignAnalysis:
    """analysis.json beside the analysis notebook, validated through CampaignAnalysis."""
    run = run_dir if isinstance(run_dir, RunDir) else RunDir.existing(run_dir)
    result = analyse_run(run)
    write_model(run.analysis, result)
    return result
