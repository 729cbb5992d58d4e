"""Runs of one campaign compared (another host, another engine build): the host's identity and the
engines' builds are the declared variables under test; everything the fairness check holds fixed
across arms must also match across runs, or the comparison says it is not comparable."""
from __future__ import annotations

import os

import pandas as pd

from stackbook.analysis import comparison
from stackbook.analysis.fairness import DIFFERS, MEASURED_FIELDS
from stackbook.analysis.run_data import load_run
from stackbook.analysis.verdict import decisions
from stackbook.evidence.rundir import RunDir

# What differs between the runs by design: shown side by side, never a reason to refuse.
ENGINE_BUILD_FIELDS = ("version", "build", "binary_sha256", "build_flags", "package", "torch")


def run_key(run: RunDir, runs: list[RunDir]) -> str:
    """A run's short name in tables and legends: its directory name, or campaign/name when two share it."""
    same = [r for r in runs if r.name == run.name]
    return run.name if len(same) == 1 else f"{run.path.parent.name}/{run.name}"


def load_runs(runs: list[RunDir]) -> tuple[str, dict[str, tuple]]:
    """(campaign name, {run key: (campaign, arms)}) for runs of one campaign; refuses mixed campaigns."""
    if len(runs) < 2:
        raise ValueError("compare needs at least two run directories (e.g. outputs/quickstart/reference "
                         "outputs/quickstart/avx2-host)")
    loaded = {run_key(r, runs): load_run(r) for r in runs}
    names = {key: c.name for key, (c, _) in loaded.items()}
    if len(set(names.values())) != 1:
        raise ValueError("runs of different campaigns cannot be compared (campaign.resolved.yaml, field name: "
                         + ", ".join(f"{k}: {v}" for k, v in names.items()) + "); compare runs of one campaign")
    return next(iter(names.values())), loaded


def runs_summary(campaign: str, loaded: dict[str, tuple], runs: list[RunDir], out_dir: str | None) -> str:
    """One Markdown line naming the campaign and linking each run's report (its directory when it has
    none), relative to where the comparison is written."""
    def link(run: RunDir) -> str:
        target = run.report if run.report.exists() else run.path
        return os.path.relpath(target, out_dir or ".")

    return f"**Campaign** `{campaign}` · **runs** " + ", ".join(
        f"[`{key}`]({link(run)})" for key, run in zip(loaded, runs))


def declared_variables(loaded: dict[str, tuple]) -> pd.DataFrame:
    """Per run: the host (CPU, logical CPUs, memory, instruction sets where recorded) and each arm's
    engine build, the variables this comparison is about."""
    rows = {}
    for key, (_, arms) in loaded.items():
        row = {}
        for name, a in arms.items():
            ident = (a.get("passport") or {}).get("identity", {})
            host = ident.get("host", {})
            for field in ("cpu", "logical_cpus", "memory_gib", "instruction_sets", "accelerator"):
                if field in host and f"host {field}" not in row:
                    v = host[field]
                    row[f"host {field}"] = " ".join(v) if isinstance(v, list) else v
            engine = ident.get("engine", {})
            build = [str(engine[f]) for f in ENGINE_BUILD_FIELDS if engine.get(f)]
            row[f"{name} engine build"] = " · ".join(build) or "-"
        rows[key] = row
    return pd.DataFrame(rows)


def fairness_across_runs(loaded: dict[str, tuple]) -> pd.DataFrame:
    """Every field the arms' fairness check holds fixed, per arm, side by side across runs, and
    whether it reads the same in all of them."""
    per_run = {}
    for key, (campaign, arms) in loaded.items():
        fair = comparison.fairness_table(campaign, arms)
        fair = fair[[c for c in fair.columns if c != DIFFERS and c != "comparable"
                     and c not in MEASURED_FIELDS]]
        per_run[key] = fair.stack()
    df = pd.DataFrame(per_run)
    df.index.names = ["arm", "field"]
    df["same in every run"] = df.apply(lambda r: r.astype(str).nunique() == 1 and r.notna().all(), axis=1)
    return df


def overlay_frame(loaded: dict[str, tuple]) -> pd.DataFrame:
    """The campaign analysis's points of every run in one frame, arms named `arm @ run`, so the
    same figures draw every run's curves together."""
    frames = []
    for key, (_, arms) in loaded.items():
        df = comparison.comparison_frame(arms)
        if not df.empty:
            frames.append(df.assign(run=key, arm=df["arm"] + " @ " + key))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def throughput_ratios(overlay: pd.DataFrame) -> pd.DataFrame:
    """Per arm and load: each run's output throughput against the first run's (1.0 = the same)."""
    if overlay.empty:
        return pd.DataFrame()
    base_arm = overlay["arm"].str.rsplit(" @ ", n=1).str[0]
    wide = overlay.assign(base_arm=base_arm).pivot_table(index=["base_arm", "load"], columns="run",
                                                        values="output_throughput_tok_s", sort=False)
    first = wide.columns[0]
    ratios = wide.div(wide[first], axis=0).drop(columns=first)
    ratios.columns = [f"{c} / {first} (throughput ratio)" for c in ratios.columns]
    ratios.index.names = ["arm", "load"]
    return ratios


def _leaves(value, prefix: str = "") -> dict[str, object]:
    if isinstance(value, dict) and value:
        out: dict[str, object] = {}
        for k, v in value.items():
            out |= _leaves(v, f"{prefix}.{k}" if prefix else str(k))
        return out
    return {prefix: value}


def protocol_differences(loaded: dict[str, tuple]) -> list[tuple[str, dict[str, object]]]:
    """Every field of the campaign as executed (protocol, model, hardware, each arm's engine
    settings) whose value differs between runs, with each run's value; a field one run lacks reads
    "absent". Only the host and the engine builds are variables of a comparison across runs."""
    flat = {}
    for key, (campaign, _) in loaded.items():
        data = campaign.model_dump(mode="json", exclude={"name", "description"})
        data["arms"] = {a["name"]: {k: v for k, v in a.items() if k not in ("name", "description")}
                        for a in data.pop("arms")}
        flat[key] = _leaves(data)
    fields = sorted(set().union(*(f.keys() for f in flat.values())))
    out = []
    for field in fields:
        values = {key: f.get(field, "absent") for key, f in flat.items()}
        if len({repr(v) for v in values.values()}) > 1:
            out.append((field, values))
    return out


def differences_line(diffs: list[tuple[str, dict[str, object]]]) -> str:
    return "; ".join(f"{field} (" + ", ".join(f"{run}: {v}" for run, v in values.items()) + ")"
                     for field, values in diffs)


def run_decisions(loaded: dict[str, tuple]) -> dict[str, dict[float, str]]:
    """Per run, per load: what that run's own decision rule says on its primary figure (the leader,
    "no difference" or "undecided"), over every pair of its ranked arms."""
    out = {}
    for key, (campaign, arms) in loaded.items():
        fair = comparison.fairness_table(campaign, arms)
        df = comparison.comparison_frame(arms, fair)
        found = decisions(df, campaign.protocol, comparison.comparable_arms(df, fair)) if not df.empty else []
        per_load: dict[float, list] = {}
        for d in found:
            if d.metric == campaign.protocol.decision.primary:
                per_load.setdefault(d.load, []).append(d)
        out[key] = {load: "; ".join(f"{x.leader} ahead of {x.arm_b if x.leader == x.arm_a else x.arm_a}"
                                    if x.decision == "ahead" else f"{x.arm_a} and {x.arm_b}: {x.decision}"
                                    for x in ds) for load, ds in per_load.items()}
    return out


def verdict(loaded: dict[str, tuple], fairness: pd.DataFrame, overlay: pd.DataFrame) -> list[str]:
    """Plain-language findings: whether the runs are comparable (every differing field named with
    each run's value; then nothing is ranked), each run's own decision per load, whether those
    decisions agree, and how far each arm moved."""
    lines = []
    diffs = protocol_differences(loaded)
    differing = fairness[~fairness["same in every run"]] if not fairness.empty else fairness
    if diffs or not differing.empty:
        named = differences_line(diffs)
        observed = sorted({f"{arm}.{field}" for arm, field in differing.index}) if not differing.empty else []
        lines.append("Not comparable: " + (f"the campaign differs between runs in {len(diffs)} field(s): {named}"
                                           if diffs else "")
                     + ("; " if diffs and observed else "")
                     + (f"what the arms did differs in {', '.join(observed)}" if observed else "")
                     + ". Only the host and the engine builds may differ, so nothing is ranked across these runs: "
                       "run the same campaign file on each host.")
        return lines
    if overlay.empty:
        return lines + ["No run has a measured sweep: nothing to compare."]
    per_run = run_decisions(loaded)
    primary = next(iter(loaded.values()))[0].protocol.decision.primary
    for key, by_load in per_run.items():
        if by_load:
            lines.append(f"{key} ({primary}, its own decision rule): "
                         + "; ".join(f"at load {load:g} {text}" for load, text in sorted(by_load.items())) + ".")
    if not any(per_run.values()):
        lines.append("No run has two ranked, comparable arms (see each run's own verdict): no decision to set "
                     "side by side across the runs.")
    loads = sorted(set.intersection(*(set(v) for v in per_run.values()))) if per_run else []
    undecided = [load for load in loads if any("undecided" in per_run[k][load] for k in per_run)]
    flipped = [load for load in loads if load not in undecided and len({per_run[k][load] for k in per_run}) > 1]
    if flipped:
        lines.append("The decision depends on the host or engine build at load " + ", ".join(f"{x:g}" for x in flipped)
                     + ". Choose with the run made on the hardware you will serve on.")
    if undecided:
        lines.append("No cross-run statement at load " + ", ".join(f"{x:g}" for x in undecided)
                     + ": a run leaves the comparison undecided there (add repetitions).")
    if loads and not flipped and not undecided:
        lines.append("The decision holds across the runs at every shared load.")
    ratios = throughput_ratios(overlay)
    for col in ratios.columns:
        for arm, g in ratios[col].groupby(level="arm"):
            v = g.dropna()
            if len(v):
                lines.append(f"{arm}: {col.split(' (')[0]} output throughput {v.min():.2f}x to {v.max():.2f}x.")
    return lines
