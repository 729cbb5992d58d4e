"""Runs of one campaign compared (another host, another engine build): the host's identity and the
engines' builds are the declared variables under test; everything the fairness check holds fixed
across arms must also match across runs, or the comparison says it is not comparable."""
from __future__ import annotations

import pandas as pd

from stackbook.analysis import comparison
from stackbook.evidence.label import Label
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
    loaded = {run_key(r, runs): comparison.load_run(r) for r in runs}
    names = {key: c.name for key, (c, _) in loaded.items()}
    if len(set(names.values())) != 1:
        raise ValueError("runs of different campaigns cannot be compared (campaign.resolved.yaml, field name: "
                         + ", ".join(f"{k}: {v}" for k, v in names.items()) + "); compare runs of one campaign")
    return next(iter(names.values())), loaded


def runs_summary(campaign: str, loaded: dict[str, tuple], runs: list[RunDir], out_dir: str | None) -> str:
    """One Markdown line naming the campaign and linking each run's report (its directory when it has
    none), relative to where the comparison is written."""
    import os

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
        fair = fair[[c for c in fair.columns if not c.startswith("differs_from_") and c != "comparable"]]
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


def _leaders(df: pd.DataFrame) -> dict:
    """{load: arm} with the highest output throughput among ranked points, per load."""
    ok = df[(df["label"] == Label.ACCEPTED.value) & ~df["discarded"]].dropna(subset=["output_throughput_tok_s"])
    return {load: g.loc[g["output_throughput_tok_s"].idxmax(), "arm"] for load, g in ok.groupby("load")}


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


def verdict(loaded: dict[str, tuple], fairness: pd.DataFrame, overlay: pd.DataFrame) -> list[str]:
    """Plain-language findings: whether the runs are comparable, who leads at each load in each run,
    whether that ranking holds across runs, and how far each arm moved."""
    lines = []
    differing = fairness[~fairness["same in every run"]]
    if not differing.empty:
        fields = sorted({f"{arm}.{field}" for arm, field in differing.index})
        lines.append("Not comparable: the protocol differs between runs in " + ", ".join(fields)
                     + "; only the host and the engine builds may differ.")
    if overlay.empty:
        return lines + ["No run has a measured sweep: nothing to compare."]
    leaders = {key: _leaders(overlay[overlay["run"] == key].assign(
        arm=lambda d: d["arm"].str.rsplit(" @ ", n=1).str[0])) for key in loaded}
    for key, lead in leaders.items():
        if lead:
            lines.append(f"{key}: highest output throughput at load "
                         + ", ".join(f"{load:g} {arm}" for load, arm in sorted(lead.items())) + ".")
    loads = sorted(set.intersection(*(set(v) for v in leaders.values())))
    flipped = [load for load in loads if len({lead[load] for lead in leaders.values()}) > 1]
    if flipped:
        lines.append("The ranking depends on the host or engine build: the leader changes at load "
                     + ", ".join(f"{x:g}" for x in flipped) + ". Choose with the run made on the hardware you will serve on.")
    elif loads:
        lines.append("The ranking holds across the runs at every shared load.")
    ratios = throughput_ratios(overlay)
    for col in ratios.columns:
        for arm, g in ratios[col].groupby(level="arm"):
            v = g.dropna()
            if len(v):
                lines.append(f"{arm}: {col.split(' (')[0]} output throughput {v.min():.2f}x to {v.max():.2f}x.")
    return lines
