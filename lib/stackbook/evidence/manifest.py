"""manifest.json: per arm and notebook, status, timings and hashes; validated on every save."""
from __future__ import annotations

import time
from typing import Any, Literal, Optional

from pydantic import Field

from stackbook.evidence.files import file_sha256, read_json, write_model
from stackbook.evidence.results import Open
from stackbook.evidence.rundir import RunDir
from stackbook.locations import relative_to_repo


class NotebookEntry(Open):
    status: Literal["running", "ok", "failed", "skipped"]
    seconds: Optional[float] = None
    sha256: Optional[str] = None
    error: Optional[str] = None
    reason: Optional[str] = None


class Placement(Open):
    """Where an arm ran: the executor, the node (a Ray node id under the ray executor), its host
    name and the resources granted to the arm there, with the wall-clock span on that node."""
    executor: Literal["local", "ray"]
    host: Optional[str] = None
    node_id: Optional[str] = None
    node_ip: Optional[str] = None
    resources: dict[str, float] = Field(default_factory=dict)
    started_unix: Optional[float] = None
    finished_unix: Optional[float] = None


class ArmEntry(Open):
    status: Literal["pending", "running", "complete", "held", "failed", "engine_died", "interrupted", "node_lost"]
    notebooks: dict[str, NotebookEntry] = Field(default_factory=dict)
    engine: Optional[str] = None
    stages: list[str] = Field(default_factory=list)
    engine_starts: Optional[int] = None
    engine_ready_s: Optional[float] = None
    engine_exit_code: Optional[int] = None
    seconds: Optional[float] = None
    error: Optional[str] = None
    placement: Optional[Placement] = None


class AnalysisEntry(Open):
    status: Optional[Literal["ok", "failed"]] = None
    seconds: Optional[float] = None
    sha256: Optional[str] = None
    error: Optional[str] = None


class AttachedNotebook(Open):
    status: Literal["ok", "failed"]
    seconds: Optional[float] = None
    sha256: Optional[str] = None
    note: str = ""


class Manifest(Open):
    """manifest.json: what ran, how it ended, and the hash of every output."""
    campaign: str
    campaign_file: str
    status: Literal["running", "complete", "held", "incomplete", "interrupted"]
    created_unix: float
    arms: dict[str, ArmEntry] = Field(default_factory=dict)
    analysis: AnalysisEntry = Field(default_factory=AnalysisEntry)
    campaign_sha256: Optional[str] = None
    executor: Optional[str] = None
    # The harness's own open-loop ceiling, measured at campaign start on this host (harness.ceiling).
    harness_ceiling: Optional[dict[str, Any]] = None
    resumed: Optional[int] = None
    interrupted_by: Optional[str] = None
    # What run.lock said when this run took it over from a writer that had died holding it.
    lock_taken_over: Optional[dict[str, Any]] = None
    finished_unix: Optional[float] = None
    # Where the run's time went (evidence.phase_times): engine starts, sizing, canaries, sweeps,
    # analysis, the rest, and the wall time.
    phase_seconds: dict[str, float] = Field(default_factory=dict)
    outputs: dict[str, str] = Field(default_factory=dict)
    absolute_paths_left: list[str] = Field(default_factory=list)
    # Teaching notebooks executed over the finished run (`stackbook attach`), by notebook name.
    attached: dict[str, AttachedNotebook] = Field(default_factory=dict)


class ManifestFile:
    """The run's manifest as the runner updates it: plain dicts in memory, checked against
    Manifest and rewritten atomically on every save."""

    def __init__(self, run: RunDir, campaign, campaign_file: str):
        self.path = run.manifest
        self.data: dict[str, Any] = read_json(self.path) or {
            "campaign": campaign.name, "campaign_file": relative_to_repo(campaign_file), "status": "running",
            "created_unix": time.time(), "arms": {}, "analysis": {}}

    def save(self) -> None:
        write_model(self.path, Manifest.model_validate(self.data))

    def record_outputs(self, run: RunDir) -> None:
        """The hash of every file of the run but the manifest itself."""
        self.data["outputs"] = {str(p.relative_to(run.path)): file_sha256(p) for p in run.files() if p != run.manifest}

    def arm(self, name: str) -> dict:
        return self.data["arms"].setdefault(name, {"status": "pending", "notebooks": {}})


def read_manifest(run: RunDir) -> Manifest | None:
    data = read_json(run.manifest)
    return Manifest.model_validate(data) if data is not None else None
