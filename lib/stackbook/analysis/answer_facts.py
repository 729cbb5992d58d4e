"""The stored files the answer block reads, loaded into plain data: a run's analysis.json, manifest,
resolved campaign and passports, and the other runs of its campaign under outputs/ (the same
campaign measured on other hosts)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from stackbook.evidence.files import read_json
from stackbook.evidence.rundir import RunDir
from stackbook.locations import OUTPUTS_DIR


@dataclass(frozen=True)
class RunFacts:
    """What the answer reads of one run, as plain data."""
    name: str                 # the run as a reader finds it: <campaign>/<run-id>
    analysis: dict            # analysis.json
    manifest: dict = field(default_factory=dict)
    campaign: dict = field(default_factory=dict)   # campaign.resolved.yaml
    passports: dict = field(default_factory=dict)  # arm -> passport.json


def run_name(path: Path, outputs: Path = OUTPUTS_DIR) -> str:
    """<campaign>/<run-id> as a reader finds the run under outputs/."""
    path = Path(path).resolve()
    try:
        return path.relative_to(Path(outputs).resolve()).as_posix()
    except ValueError:
        return f"{path.parent.name}/{path.name}"


def read_campaign(run: RunDir) -> dict:
    try:
        return yaml.safe_load(run.campaign_resolved.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return {}


def run_facts(run: RunDir | Path, analysis: dict | None = None, campaign: dict | None = None,
              outputs: Path = OUTPUTS_DIR) -> RunFacts:
    """One run's facts; `analysis` and `campaign` given where the caller holds them fresher than the files."""
    run = run if isinstance(run, RunDir) else RunDir(run)
    return RunFacts(name=run_name(run.path, outputs),
                    analysis=analysis if analysis is not None else read_json(run.analysis, {}) or {},
                    manifest=read_json(run.manifest, {}) or {},
                    campaign=campaign if campaign is not None else read_campaign(run),
                    passports={p.parent.name: read_json(p, {}) or {} for p in run.passports()})


def other_runs(run: RunDir | Path, campaign: str, outputs: Path = OUTPUTS_DIR) -> list[RunFacts]:
    """The other runs of `campaign` under outputs/ that hold an analysis (comparisons left out; a
    copy of a committed run, elsewhere under its own name, does not count its original)."""
    here = Path(run.path if isinstance(run, RunDir) else run).resolve()
    root = Path(outputs) / campaign
    found = sorted(p.parent for p in root.glob("*/analysis.json")) if root.is_dir() else []
    return [run_facts(RunDir(p), outputs=outputs) for p in found
            if p.resolve() != here and run_name(p, outputs) != run_name(here, outputs)]
