"""The sweep step of 30_load_sweep: run the sweep, write its results and the passport, and the
tables the notebook shows."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from stackbook.analysis.run_data import arm_requests_frame
from stackbook.evidence.files import read_json, update_results
from stackbook.run_checks.passport import write_passport
from stackbook.evidence.results import ArmResults
from stackbook.loadgen.load_point import Load
from stackbook.loadgen.records import read_records
from stackbook.measure.metric_definitions import columns
from stackbook.measure.metrics import peer_definitions
from stackbook.measure.sweep import point_name, run_sweep
from stackbook.measure.validity import CLIENT_CPU_NEAR_CORE


def arm_sweep(session, run_id: str | None = None, progress: bool = True, repetitions: list[int] | None = None,
              began: str | None = None) -> dict:
    """Run the given repetitions of the arm's sweep (None: the protocol's minimum), then write the
    results of every repetition measured so far and the passport."""
    out = run_sweep(session, run_id or session.run_dir.name, progress=progress, repetitions=repetitions,
                    began=began or ("the engine this notebook started" if session.started_here else None))
    measured = ArmResults.model_validate({**(read_json(session.arm_dir.results, {}) or {}), "sweep": out})
    out["label"] = measured.label().value
    update_results(session.arm_dir, "sweep", out)
    write_passport(session.campaign, session.arm, session.arm_dir)
    return out


def points_table(sweep: dict) -> pd.DataFrame:
    cols = ["concurrency", "repetition", "completed", "requests",
            *columns(("ttft_ms", "p50", "p99"), ("tpot_ms", "p50", "p99"), ("itl_ms", "p50"),
                     ("e2e_ms", "p50", "p95", "p99")),
            "output_throughput_tok_s", "goodput_rps", "slo_attainment", "littles_law_concurrency"]
    from stackbook.analysis.decision import sized_percentiles

    df = pd.DataFrame.from_dict(sweep["points"], orient="index")
    return sized_percentiles(df[[c for c in cols if c in df.columns]].round(2))


def points_frame(session, sweep: dict) -> pd.DataFrame:
    """This arm's points in the campaign analysis's shape (arm, label, point, discarded, load and
    the flat metrics), so the sweep notebook draws the same figures, HOLD and discards marked."""
    from stackbook.analysis.comparison import discard_rules_by_point, point_status

    rules = discard_rules_by_point(sweep)
    label = sweep.get("label", "accepted")
    rows = [{"arm": session.arm.name, "label": label, "point": name,
             "discarded": bool(s.get("discarded")),
             **{k: v for k, v in s.items() if not isinstance(v, (dict, list)) and k != "discarded"},
             "status": point_status(label, bool(s.get("discarded")), rules.get(name))}
            for name, s in sweep["points"].items()]
    return pd.DataFrame(rows)


def load_figures_table(session, points: pd.DataFrame) -> tuple[pd.DataFrame, float]:
    """This arm's figures per load over its repetitions, with the intervals the campaign's verdict
    uses (the same rule, one arm)."""
    from stackbook.analysis.verdict import load_table, verdict_confidence

    confidence = verdict_confidence(session.protocol)
    return (load_table(points, confidence) if not points.empty else pd.DataFrame()), confidence


def arm_requests(session) -> pd.DataFrame:
    return arm_requests_frame(Path(session.arm_dir.requests))


def workload_table(session) -> pd.DataFrame:
    """The workload and load shape every request of this arm followed, in words."""
    p = session.protocol
    w = p.workload
    rows = {
        "prompt tokens (user content per request or turn)": w.prompt_tokens.describe(),
        "output tokens": w.output_tokens.describe(),
        "shared prefix": (f"{w.shared_prefix.groups} group(s) of {w.shared_prefix.tokens} tokens"
                          + (f", group g drawn with weight 1/g^{w.shared_prefix.zipf_exponent:g} (Zipf)"
                             if w.shared_prefix.zipf_exponent else "")
                          if w.shared_prefix else "none: prompts share only the chat template"),
        "conversation": f"{w.conversation.turns} turns, full history each turn" if w.conversation else "single turn",
        "reply format": ("JSON under a fixed schema, checked per request" if w.response_format == "json_schema"
                         else "free text, length forced where the engine allows"),
        "system prompt": w.system_prompt or "none",
        "arrival": p.arrival.model_dump(),
        "prefix cache": {"cold": "flushed before every point", "warm": "flushed, then primed, before every point"}[
            p.prefix_cache],
        "decoding": p.decoding.resolved() | {"preset": p.decoding.preset},
    }
    return pd.Series(rows, dtype=object).to_frame("protocol")


def prefix_cache_table(sweep: dict) -> pd.DataFrame:
    return pd.DataFrame(sweep["prefix_cache"]["points"]).T


def peer_definitions_table(session) -> pd.DataFrame:
    """This arm's measured requests under vLLM's, GuideLLM's and AIPerf's definitions."""
    records = read_records(session.arm_dir.requests, latest_attempt=True)
    return peer_definitions(records).round(2)


def engine_truth_table(sweep: dict) -> pd.DataFrame:
    """Per point: the engine's gauges while the load ran, and its histograms beside the client."""
    rows = {}
    for name, p in sweep["points"].items():
        row = dict(p.get("engine_reconciliation") or {})
        for key, v in (p.get("engine_gauges_during") or {}).items():
            if isinstance(v, dict):
                row[f"{key.split('{', 1)[0]} mean/max"] = f"{v['mean']:g} / {v['max']:g}"
        rows[name] = row
    return pd.DataFrame(rows).T


def telemetry_table(sweep: dict) -> pd.DataFrame:
    """The engine's metric increases per point, histogram buckets left out (they stay in
    results.json, where a distribution's spread is estimated from them)."""
    df = pd.DataFrame(sweep["telemetry"])
    return df[[not str(i).split("{", 1)[0].endswith("_bucket") for i in df.index]] if not df.empty else df


def runtime_table(sweep: dict) -> pd.DataFrame:
    """Per point: CPU seconds by process and per request, the engine's page faults and context
    switches, its own phase times, batch size, work and accepted length (runs recorded before
    these readings existed show none)."""
    rows = {}
    for name, p in sweep["points"].items():
        cpu, done = p.get("cpu_seconds"), p.get("requests_in_cpu_window")
        if not cpu:
            continue
        row = {"requests in window": done, "window (s)": p.get("cpu_window_s"),
               "client CPU (s)": cpu["client"],
               **{f"{role} CPU (s)": v for role, v in cpu.get("engine", {}).items()}}
        if done:
            row["client CPU per request (ms)"] = 1000 * cpu["client"] / done
            row.update({f"{role} CPU per request (ms)": 1000 * v / done for role, v in cpu.get("engine", {}).items()})
        row.update({k.replace("_", " "): v for k, v in (p.get("engine_host_counters") or {}).items()})
        t = p.get("engine_time_ms") or {}
        row.update({f"engine {ph} (ms)": t.get(ph) for ph in ("queue", "prefill", "decode", "inference")})
        row["batch size N_batch (mean)"] = p.get("batch_size_mean")
        row["tokens per engine step"] = p.get("tokens_per_step_mean")
        w = p.get("work_tokens") or {}
        row["prompt tokens (prefill work)"] = w.get("prompt_tokens")
        row["generated tokens (decode work)"] = w.get("generated_tokens")
        sd = p.get("spec_decode")
        row["accepted length"] = sd.get("accepted_length_mean") if isinstance(sd, dict) else sd
        rows[name] = row
    return pd.DataFrame(rows).T


def client_table(sweep: dict) -> pd.DataFrame:
    """Per point: the client processes that sent it and the share of a core each one used."""
    rows = {name: {"client processes": p.get("client_processes"),
                   "busiest process (share of a core)": p.get("client_cpu_fraction"),
                   "each process": ", ".join(f"{x:.2f}" for x in p.get("client_cpu_fraction_by_process") or [])}
            for name, p in sweep["points"].items()}
    return pd.DataFrame(rows).T


def client_note(sweep: dict) -> str:
    """The sweep's word on its client: every point where a client process neared one core, with
    the setting that spreads the load, or that none did."""
    warnings = sweep.get("client_warnings") or []
    if not warnings:
        return (f"No client process neared a full core (limit {CLIENT_CPU_NEAR_CORE:.0%}): "
                "the load generator kept up at every point.")
    return "\n".join(f"- **Client near one core**: {w}" for w in warnings)


def sweep_summary(sweep: dict) -> str:
    """The sweep's label, peak engine memory and error counts, in one line of Markdown."""
    return (f"Label: **{sweep['label']}** · peak engine memory {sweep['peak_engine_rss_gib']} GiB · "
            f"errors {sweep['error_counts']}")


def _load_of(level: dict) -> float:
    load = Load.of(level)
    return 0 if load.kind == "replay" else load.value


def request_stats_by_load(requests: pd.DataFrame, levels: list[dict],
                          columns: tuple[str, ...] = ("ttft_ms", "tpot_ms", "e2e_ms", "output_tokens")
                          ) -> pd.DataFrame:
    """Statistics of the measured requests, one column per load level (repetitions pooled),
    ordered by load: concurrency for a closed loop, offered rate for an open one.

    The level comes from each record's point name, not from its `concurrency` field, which is 0
    for every open-loop record: grouping on it would pool all the rates into one column.
    `levels` is `measure.sweep.load_levels(protocol)`."""
    m = requests[requests["phase"] == "measure"]
    if m.empty:
        return pd.DataFrame()
    level_of = {point_name(lv, int(r)): lv["level"] for lv in levels for r in m["repetition"].unique()}
    keys = m["point"].map(lambda p: level_of.get(p, p))
    stats = m[list(columns)].astype(float).groupby(keys, sort=False).describe().T
    known = [lv["level"] for lv in sorted(levels, key=_load_of)]
    order = [k for k in known if k in stats.columns] + sorted(k for k in stats.columns if k not in known)
    stats = stats[order].round(1)
    stats.columns.name = "load level"
    return stats
