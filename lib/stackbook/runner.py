"""Run a campaign: per arm, start its engine once, execute the arm notebooks with papermill,
stop the engine; then the campaign analysis, a manifest and an HTML report.

Where the arms run is the executor's business (`stackbook.executors`: one after another here, or
as Ray tasks on the nodes holding their resources); every executor calls `stackbook.arm_run` for
the per-arm work, so an arm does the same thing wherever it runs."""
from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import yaml
from tqdm import tqdm

from stackbook.arm_run import RunInterrupted, campaign_steps
from stackbook.config.campaign import Campaign
from stackbook.config.errors import CampaignError
from stackbook.config.estimate import ArmEstimate, campaign_plan
from stackbook.config.loading import load_campaign
from stackbook.config.precision import precision_record
from stackbook.run_checks.preflight import load_refusals
from stackbook.evidence.files import file_sha256
from stackbook.evidence.phase_times import phase_times
from stackbook.evidence.harness import fix_revision, starting_revision
from stackbook.evidence.manifest import ManifestFile
from stackbook.evidence.portable import campaign_secrets, make_portable, redact
from stackbook.evidence.run_lock import hold_run, refuse_if_held
from stackbook.evidence.rundir import RunDir
from stackbook.executors import LocalExecutor
from stackbook.harness.ceiling import record_ceiling
from stackbook.locations import OUTPUTS, REPO_ROOT
from stackbook.reports import attach_teaching, run_analysis


def _raise_interrupt(signum, frame):
    raise RunInterrupted(signum)


def _repo_relative(run: RunDir) -> RunDir:
    return RunDir(os.path.relpath(run.path.resolve(), REPO_ROOT))


def open_run(campaign_file: str, run_id: str | None, resume: str | None) -> tuple[Campaign, RunDir]:
    if resume:
        run = RunDir.existing(resume)
        return load_campaign(run.campaign_resolved), _repo_relative(run)
    campaign = load_campaign(campaign_file)
    unheld = load_refusals(campaign)
    if unheld:
        raise CampaignError(f"{campaign_file}: the campaign cannot hold its load:\n"
                            + "\n".join(f"  - {r}" for r in unheld))
    run = RunDir.new(campaign.name, run_id)
    refuse_if_held(run)
    if run.manifest.exists():
        raise FileExistsError(f"{run} already holds a run; use --resume {run} to continue it")
    return campaign, _repo_relative(run.create())


@dataclass
class CampaignRun:
    """What every arm of one run shares, handed to the executor: the campaign, the run directory
    and its resolved campaign file, the manifest, the progress bar and the log."""
    campaign: Campaign
    run_dir: RunDir
    resolved: Path
    manifest: ManifestFile
    steps: tqdm
    progress: bool
    log: Callable[[str], None]
    plan: dict[str, ArmEstimate] = field(default_factory=dict)  # each arm's estimate, revised as slots finish


def run_campaign(campaign_file: str, run_id: str | None = None, resume: str | None = None,
                 only_arms: list[str] | None = None, progress: bool = True, log=print, executor=None,
                 allow_modified: bool = False) -> RunDir:
    """Execute a campaign into outputs/<campaign>/<run-id>/ and return that directory.

    `executor` places the arms (default: the local one, every arm here, one after another); the
    analysis always runs here, after every arm.

    SIGINT and SIGTERM stop the run cleanly: the engine of the arm in progress is stopped, every
    record written so far stays, and the manifest says what was cut, ready for --resume.

    Modified code (evidence.harness) refuses the run before anything is written, unless
    `allow_modified` (or STACKBOOK_ALLOW_MODIFIED=1) asks for it; then the run is marked so.
    """
    executor = executor or LocalExecutor()
    os.chdir(REPO_ROOT)
    revision = starting_revision(allow_modified)
    campaign, run_dir = open_run(campaign_file, run_id, resume)
    lock = hold_run(run_dir)  # one writer per run directory: another run of it is refused, naming this one
    secrets = campaign_secrets(campaign)
    resolved = run_dir.campaign_resolved
    if not resolved.exists():
        dumped = campaign.model_dump(mode="json", by_alias=True)
        resolved.write_text(redact(yaml.safe_dump(dumped, sort_keys=False), secrets))
    manifest = ManifestFile(run_dir, campaign, str(campaign_file or resolved))
    manifest.data.update(lock.manifest_note())
    manifest.data["status"] = "running"
    manifest.data["campaign_sha256"] = file_sha256(resolved)
    manifest.data["executor"] = executor.name
    fix_revision(manifest.data, resumed=bool(resume), now=revision)
    record_ceiling(manifest.data, campaign)  # the harness's own ceiling at campaign start (seconds), kept on resume
    # the precision chosen on this host (or named, with the warning when an engine emulates it), kept on resume
    manifest.data.setdefault("precision", precision_record(campaign.protocol.precision, campaign.arms))
    if resume:
        manifest.data["resumed"] = manifest.data.get("resumed", 0) + 1
    manifest.save()
    arms = [a for a in campaign.arms if not only_arms or a.name in only_arms]
    steps = tqdm(total=campaign_steps(len(arms), campaign.protocol.repetitions.min),
                 desc=campaign.name, unit="step", disable=not progress)
    previous = {sig: signal.signal(sig, _raise_interrupt) for sig in (signal.SIGINT, signal.SIGTERM)} \
        if threading.current_thread() is threading.main_thread() else {}
    try:
        plan = campaign_plan(campaign, arms, REPO_ROOT / OUTPUTS)
        executor.run_arms(CampaignRun(campaign, run_dir, resolved, manifest, steps, progress, log, plan), arms)
        steps.set_postfix_str("analysis")
        attach_teaching(run_dir, campaign, manifest)
        run_analysis(run_dir, manifest)
        steps.update(1)
        statuses = [manifest.arm(a.name)["status"] for a in arms]
        manifest.data["status"] = run_outcome(statuses, manifest.data["analysis"].get("status") == "ok")
    except RunInterrupted as stop:
        manifest.data["status"] = "interrupted"
        manifest.data["interrupted_by"] = str(stop)
        log(f"run interrupted by {stop}: records kept; continue with: stackbook run --resume {run_dir}")
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        steps.close()
        manifest.data["finished_unix"] = time.time()
        manifest.data["phase_seconds"] = phase_times(manifest.data)
        manifest.save()
        leftovers = make_portable(run_dir, secrets)
        manifest.record_outputs(run_dir)
        manifest.data["absolute_paths_left"] = leftovers
        manifest.save()
        lock.release()
    return run_dir


def run_outcome(arm_statuses: list[str], analysis_ok: bool) -> str:
    """complete: every arm ran through and passed its gate; held: every arm ran through, some held
    by their canaries; else incomplete."""
    if not analysis_ok or any(s not in ("complete", "held") for s in arm_statuses):
        return "incomplete"
    return "held" if "held" in arm_statuses else "complete"
