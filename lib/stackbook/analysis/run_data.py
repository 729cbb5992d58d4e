"""Loading a finished run: its campaign, each arm's evidence files and its label. Kept apart from
the analyses (stackbook.analysis.comparison, stackbook.analysis.demand_map) so that each of them
reads a run the same way without importing the other."""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from stackbook.config.loading import load_campaign
from stackbook.evidence.files import read_json, while_unchanged
from stackbook.evidence.label import Label
from stackbook.evidence.results import ArmResults
from stackbook.evidence.rundir import RunDir
from stackbook.loadgen.records import read_records
from stackbook.measure.metrics import requests_frame


_frames: dict = {}


def arm_requests_frame(path: Path) -> pd.DataFrame:
    """The per-request metrics of an arm's records. A report reads one run several times (the
    verdict, the demand map, the summary); an unchanged file is turned into a frame once."""
    if not path.exists():
        return requests_frame([])
    return while_unchanged(_frames, path, lambda p: requests_frame(read_records(p))).copy()


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
            "requests": arm_requests_frame(Path(d.requests)),
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
