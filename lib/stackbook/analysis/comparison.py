"""Campaign-level analysis: check fairness, compare arms, state a verdict (loading a run is
stackbook.analysis.run_data, whose load_run and arm_labels are re-exported here)."""
from __future__ import annotations

import os
from typing import Any

import pandas as pd

from stackbook.analysis.capacity_summary import capacity_tables
from stackbook.analysis.demand_map import ArmDemandMap, demand_maps_of
from stackbook.measure.metric_definitions import column, columns
from stackbook.measure.reconciliation import reconciliation_rows
from stackbook.measure.validity import worded_discards
from stackbook.analysis.fairness import DIFFERS, fairness_table, remedy_words
from stackbook.analysis.open_loop_waits import open_loop_points
from stackbook.analysis.known_effect import known_effect_lines
from stackbook.analysis.tails import tail_lines, tail_rows
from stackbook.analysis.routing_findings import routing_findings
from stackbook.analysis.run_data import arm_labels, load_run
from stackbook.analysis.verdict import (
    aa_control_lines,
    decisions,
    load_table,
    pareto_frontier,
    rankable,
    slo_capacity,
    verdict_confidence,
    verdict_lines,
)
from stackbook.evidence.files import write_model
from stackbook.evidence.label import Label
from stackbook.evidence.results import Open
from stackbook.evidence.rundir import STAGE_NOTEBOOK, ArmDir, RunDir
from stackbook.loadgen.load_point import clients_column, frame_unit

E2E_MEAN = column("e2e_ms", "mean")  # a point's mean response time, what the closed-loop model fits


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
    for d in worded_discards(sweep):
        out.setdefault(d["point"], []).append(f"{d['rule']}: {d['detail']}")
    return {p: "; ".join(v) for p, v in out.items()}


def point_status(label: str, discarded: bool, rule: str | None = None) -> str:
    """What a point is in the ranking: 'accepted' (ranked), or why it is shown but kept out (the
    discard rule, or the arm's label)."""
    if discarded:
        return f"discarded ({rule})" if rule else "discarded"
    return Label.ACCEPTED.value if label == Label.ACCEPTED.value else str(label)


def discards_frame(arms: dict) -> pd.DataFrame:
    rows = [{"arm": name, **d} for name, a in arms.items() for d in worded_discards(a["results"].get("sweep") or {})]
    return pd.DataFrame(rows)


def headline(df: pd.DataFrame) -> pd.DataFrame:
    """One row per arm and point (each repetition apart): the figures of one run of one load.
    Percentiles here are of that point's own requests (`completed` says how many)."""
    if df.empty:
        return df
    cols = ["arm", "label", "status", "discarded", "discard_rule", "load", "repetition", "concurrency", "rate",
            "scheduled_rate_rps", "speedup", "completed",
            *columns(("ttft_ms", "p50", "p99"), ("tpot_ms", "p50"), ("e2e_ms", "p50", "p95", "p99")),
            "output_throughput_tok_s", "goodput_rps", "slo_attainment"]
    decimals = {c: 4 if c == "scheduled_rate_rps" else 2 for c in cols}  # the answer quotes a schedule's own rate
    return df[[c for c in cols if c in df.columns]].sort_values(["load", "arm"]).round(decimals).reset_index(drop=True)


def not_ranked_lines(df: pd.DataFrame, fairness: pd.DataFrame) -> list[str]:
    """Every arm and point kept out of the ranking, with its reason."""
    lines = []
    ok_arms = comparable_arms(df, fairness)
    for label in Label:
        if label in (Label.ACCEPTED, Label.NOT_COMPARABLE):
            continue  # comparability has its own line below, from the fairness table
        held = sorted(set(df.loc[df["label"] == label.value, "arm"]))
        if held:
            lines.append(f"Not ranked ({label.reason}): {', '.join(held)}.")
    unfair = sorted(set(df["arm"]) - ok_arms)
    if unfair:
        lines.append(f"Not comparable (protocol differs): {', '.join(unfair)}.{remedy_words(fairness, unfair)}")
    if df["discarded"].any():
        lines.append(f"Discarded by preregistered rules (kept on disk, not ranked): "
                     f"{', '.join(df.loc[df['discarded'], 'arm'] + ' ' + df.loc[df['discarded'], 'point'])}.")
    return lines


def comparable_arms(df: pd.DataFrame, fairness: pd.DataFrame) -> set[str]:
    return set(fairness.index[fairness["comparable"]]) if not fairness.empty else set(df["arm"])


def controls(campaign) -> tuple[dict[str, str], dict[str, tuple[str, float]]]:
    """The campaign's controls: A/A replicas (arm -> original) and known-effect arms, replicas
    behind the delay relay (arm -> (original, tpot_ms))."""
    replicas = {a.name: a.replicate_of for a in campaign.arms if a.replicate_of and not a.known_delay}
    delayed = {a.name: (a.replicate_of, a.known_delay.tpot_ms) for a in campaign.arms
               if a.replicate_of and a.known_delay}
    return replicas, delayed


def verdict(df: pd.DataFrame, fairness: pd.DataFrame, protocol, replicas: dict[str, str] | None = None,
            delayed: dict[str, tuple[str, float]] | None = None) -> tuple[list[str], list]:
    """Plain-language findings and the pairwise decisions they state: who is kept out of the
    ranking and why, then per load each pair of ranked arms under the preregistered rule, then the
    controls (A/A replicas must not be ranked, known-effect arms must be)."""
    if df.empty:
        return ["No arm produced measurements."], []
    lines = not_ranked_lines(df, fairness)
    ranked = rankable(df)
    ranked = ranked[ranked["arm"].isin(comparable_arms(df, fairness))]
    if ranked["arm"].nunique() < 2:
        return lines + ["Fewer than two accepted, comparable arms: no ranking."], []
    unit = frame_unit(df)
    for load in sorted(set(df["load"])):
        present = set(ranked.loc[ranked["load"] == load, "arm"])
        if len(present) < 2:
            left = df[(df["load"] == load) & ~df["arm"].isin(present)]
            who = f"only {', '.join(sorted(present))} has" if present else "no arm has"
            why = "; ".join(f"{r['arm']} {r['point']} {r['status']}" for _, r in left.iterrows())
            lines.append(f"At {unit} {load:g}: {who} a ranked point; not compared" + (f": {why}" if why else "") + ".")
    found = decisions(df, protocol, comparable_arms(df, fairness))
    return (lines + verdict_lines(df, found, protocol, unit) + aa_control_lines(found, replicas or {})
            + known_effect_lines(df, found, delayed or {}, unit)), found


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


def roofline_efficiency(arms: dict, df: pd.DataFrame) -> pd.DataFrame:
    """Measured single-stream decode rate (concurrency 1) as a share of the bandwidth bound."""
    rows = []
    for name, a in arms.items():
        bound = (a["results"].get("sizing") or {}).get("roofline_decode_tok_s")
        clients = clients_column(df)
        one = df[(df["arm"] == name) & (clients == 1)] if clients is not None else df.iloc[0:0]
        if not bound or one.empty:
            continue
        rate = one["decode_tok_s_per_stream_mean"].iloc[0]
        rows.append({"arm": name, "decode tok/s (c=1)": round(rate, 1),
                     "± 95% CI": round(one["decode_tok_s_per_stream_ci95"].iloc[0] or 0, 1),
                     "bandwidth bound tok/s": round(bound, 1), "% of bound": round(100 * rate / bound, 1)})
    return pd.DataFrame(rows).set_index("arm") if rows else pd.DataFrame()


def queueing_fits(df: pd.DataFrame, fairness: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per arm: the closed-loop model fitted on its lightest and heaviest loads (each the mean over
    its repetitions), its predictions at every concurrency up to the heaviest, and its error at the
    loads between, which the fit never read; an arm with two loads gets one row saying nothing
    could be held out. Only ranked points enter: a discarded point or an arm kept out of the
    ranking (its label, or not comparable) would fit the model to what the verdict refuses."""
    from stackbook.analysis.queueing import closed_loop_check, pooled_loads

    curves, errors = [], []
    if df.empty or "concurrency" not in df or df["concurrency"].isna().all():
        return pd.DataFrame(), pd.DataFrame()  # the closed-network model needs a closed-loop sweep
    ranked = rankable(df)
    if fairness is not None:
        ranked = ranked[ranked["arm"].isin(comparable_arms(df, fairness))]
    for arm, g in ranked.groupby("arm"):
        pts = [{"point": r["point"], "concurrency": int(r["concurrency"]), "response_s": r[E2E_MEAN] / 1000,
                "throughput_rps": r["request_throughput_rps"], "completed": r.get("completed"),
                "window_s": r.get("window_s")}
               for _, r in g.iterrows()
               if pd.notna(r.get("concurrency")) and r.get("request_throughput_rps") and r.get(E2E_MEAN)]
        fit, held, said = closed_loop_check(pts)
        if fit is None:
            continue
        measured = {p["concurrency"]: p for p in pooled_loads(pts)}
        for c in range(1, max(measured) + 1):
            p = fit.predict(c)
            curves.append({"arm": arm, "concurrency": c, "predicted_e2e_ms": p["response_s"] * 1000,
                           "measured_e2e_ms": measured[c]["response_s"] * 1000 if c in measured else None,
                           "queue_demand_ms": fit.queue_demand_s * 1000, "delay_demand_ms": fit.delay_demand_s * 1000})
        errors += ([{"arm": arm, "concurrency": row["concurrency"],
                     "repetitions": measured[row["concurrency"]]["repetitions"], **row, "held out": said}
                    for row in held] or [{"arm": arm, "held out": said}])
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
        evidence = [("sizing", d.notebook(STAGE_NOTEBOOK["sizing"])),
                    ("canaries", d.notebook(STAGE_NOTEBOOK["canaries"])),
                    ("sweep", d.notebook(STAGE_NOTEBOOK["sweep"])), ("raw requests", d.requests),
                    ("engine log", d.engine_log), ("passport", d.passport_md)]
        return ", ".join(f"[{what}]({d.link(path)})" for what, path in evidence
                         if path.exists())  # a stage not run has no file
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
                "Pareto frontier, the SLO capacity and the verdict; the others are listed with their status. "
                "A difference is stated only when its whole interval over the repetitions lies beyond the "
                "protocol's min_effect; inside it is no difference; otherwise undecided.")


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
    decisions: list[dict[str, Any]] = []
    load_table: list[dict[str, Any]] = []
    decision_rule: dict[str, Any] = {}
    ranking_rule: str = RANKING_RULE
    demand_maps: dict[str, ArmDemandMap] = {}
    open_loop_waits: list[dict[str, Any]] = []
    reconciliation: list[dict[str, Any]] = []  # per arm and point: client against engine, with a verdict
    capacity: list[dict[str, Any]] = []  # per arm that searched: its interval over the repetitions, and the cost
    capacity_predictions: list[dict[str, Any]] = []  # per arm: sizing, demand map and MVA against that interval
    tails: list[dict[str, Any]] = []  # per arm, load and tail quantile: pooled requests, order-statistic interval
    tail_verdict: list[str] = []      # the pairs whose tails are ordered at each load, or why not
    routing: dict[str, Any] = {}      # replicas behind routers: per arm and load, policies' crossover, N over one


def _records(df: pd.DataFrame) -> list[dict]:
    """A table as JSON rows; a missing value is null."""
    if df is None or df.empty:
        return []
    return df.astype(object).where(df.notna(), None).to_dict("records")


def comparable_ranked(df: pd.DataFrame, fair: pd.DataFrame) -> pd.DataFrame:
    """The points the verdict ranks: accepted, kept by the discard rules, of comparable arms."""
    ranked = rankable(df)
    if ranked.empty or fair.empty:
        return ranked
    return ranked[ranked["arm"].isin(set(fair.index[fair["comparable"].astype(bool)]))]


def analyse_run(run_dir: str | os.PathLike | RunDir) -> CampaignAnalysis:
    """Fairness, labels, the side-by-side points, the frontier, SLO capacity and the verdict."""
    campaign, arms = load_run(run_dir)
    fair = fairness_table(campaign, arms)
    labels = arm_labels(arms, fair)
    df = comparison_frame(arms, fair)
    differs = fair[DIFFERS] if not fair.empty else pd.Series(dtype=object)

    def status_of(n: str) -> dict[str, str]:
        mine = df[df["arm"] == n] if not df.empty else df
        return dict(zip(mine["point"], mine["status"])) if not mine.empty else {}

    protocol = campaign.protocol
    conf = verdict_confidence(protocol)
    table = load_table(df, conf) if not df.empty else pd.DataFrame()
    lines, found = verdict(df, fair, protocol, *controls(campaign))
    maps = demand_maps_of(arms, labels)
    capacity, predictions = capacity_tables(campaign, arms, maps)
    tails = tail_rows({n: a["requests"] for n, a in arms.items()}, comparable_ranked(df, fair), conf)
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
        pareto_frontier=_records(pareto_frontier(table)) if not table.empty else [],
        slo_capacity=_records(slo_capacity(table, protocol.slo.attainment, protocol.decision.confidence)
                              .reset_index()) if not table.empty else [],
        verdict=lines, decisions=[d.as_row() for d in found], load_table=_records(table),
        decision_rule={**protocol.decision.model_dump(), "interval_confidence": conf,
                       "looks": protocol.repetitions.looks,
                       "interval": "Student's t over repetition estimates; between arms, the log ratio paired by "
                                   "round where both ran the same repetitions, else Welch"},
        ranking_rule=RANKING_RULE,
        demand_maps=maps,
        open_loop_waits=_records(open_loop_points(campaign, arms, df)),
        reconciliation=reconciliation_rows(arms),
        capacity=_records(capacity), capacity_predictions=_records(predictions),
        tails=tails, tail_verdict=tail_lines(tails, conf),
        routing=routing_findings(arms, comparable_ranked(df, fair), maps, conf))


def write_analysis(run_dir: str | os.PathLike | RunDir) -> CampaignAnalysis:
    """analysis.json beside the analysis notebook, validated through CampaignAnalysis."""
    run = run_dir if isinstance(run_dir, RunDir) else RunDir.existing(run_dir)
    result = analyse_run(run)
    write_model(run.analysis, result)
    return result
