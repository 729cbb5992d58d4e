"""Run a campaign: per arm, start its engine once, execute the arm notebooks with papermill,
stop the engine; then the campaign analysis, a manifest and an HTML report.

Where the arms run is the executor's business (`stackbook.executors`: one after another here, or
as Ray tasks on the nodes holding their resources); every executor calls `run_arm` for the
per-arm work, so an arm does the same thing wherever it runs."""
from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml
from tqdm import tqdm

from stackbook.config.campaign import Campaign
from stackbook.config.loading import load_campaign
from stackbook.engines import EngineStartError, adapter_for
from stackbook.evidence.files import file_sha256, read_json
from stackbook.evidence.harness import fix_revision
from stackbook.evidence.manifest import ManifestFile
from stackbook.evidence.passport import write_passport
from stackbook.evidence.portable import campaign_secrets, make_portable, redact
from stackbook.evidence.run_lock import hold_run, refuse_if_held
from stackbook.evidence.rundir import ANALYSIS_NOTEBOOK, ARM_NOTEBOOKS, STAGE_NOTEBOOK, RunDir
from stackbook.harness.ceiling import record_ceiling
from stackbook.locations import REPO_ROOT, symbolic
from stackbook.reports import write_report
from stackbook.steps.session import record_engine


def _count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


class _RequestProgress:
    """A bar of requests completed, read from the arm's requests.jsonl while a notebook runs."""

    def __init__(self, path: Path, total: int, desc: str, enabled: bool):
        self.path, self.start = path, _count_lines(path)
        self.bar = tqdm(total=total, desc=desc, unit="req", leave=False, disable=not enabled)
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.wait(0.5):
            n = min(self.bar.total, _count_lines(self.path) - self.start)
            if n != self.bar.n:
                self.bar.update(n - self.bar.n)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(2)
        self.bar.close()


def execute_notebook(name: str, out_path: Path, parameters: dict) -> float:
    """Execute notebooks/<name>.py (built into a notebook in memory) and write the executed
    .ipynb to out_path."""
    import papermill as pm

    from stackbook.notebook_sources import load_notebook

    t = time.monotonic()
    pm.execute_notebook(load_notebook(name), str(out_path), parameters=parameters,
                        kernel_name="python3", cwd=".", progress_bar=False, log_output=False,
                        request_save_on_cell_execute=True)
    return time.monotonic() - t


def notebook_ok(manifest_arm: dict, name: str, out_path: Path) -> bool:
    entry = manifest_arm["notebooks"].get(name, {})
    return entry.get("status") == "ok" and out_path.exists() and entry.get("sha256") == file_sha256(out_path)


class RunInterrupted(BaseException):
    """The runner was asked to stop (SIGINT or SIGTERM): engines are stopped, records kept."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_interrupt(signum, frame):
    raise RunInterrupted(signum)


def _repo_relative(run: RunDir) -> RunDir:
    return RunDir(os.path.relpath(run.path.resolve(), REPO_ROOT))


def open_run(campaign_file: str, run_id: str | None, resume: str | None) -> tuple[Campaign, RunDir]:
    if resume:
        run = RunDir.existing(resume)
        return load_campaign(run.campaign_resolved), _repo_relative(run)
    campaign = load_campaign(campaign_file)
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


def run_campaign(campaign_file: str, run_id: str | None = None, resume: str | None = None,
                 only_arms: list[str] | None = None, progress: bool = True, log=print, executor=None) -> RunDir:
    """Execute a campaign into outputs/<campaign>/<run-id>/ and return that directory.

    `executor` places the arms (default: the local one, every arm here, one after another); the
    analysis always runs here, after every arm.

    SIGINT and SIGTERM stop the run cleanly: the engine of the arm in progress is stopped, every
    record written so far stays, and the manifest says what was cut, ready for --resume.
    """
    from stackbook.executors import LocalExecutor

    executor = executor or LocalExecutor()
    os.chdir(REPO_ROOT)
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
    fix_revision(manifest.data, resumed=bool(resume))
    record_ceiling(manifest.data, campaign)  # the harness's own ceiling at campaign start (seconds), kept on resume
    if resume:
        manifest.data["resumed"] = manifest.data.get("resumed", 0) + 1
    manifest.save()
    arms = [a for a in campaign.arms if not only_arms or a.name in only_arms]
    steps = tqdm(total=len(arms) * (len(ARM_NOTEBOOKS) + campaign.protocol.repetitions.min) + 1,
                 desc=campaign.name, unit="step", disable=not progress)
    previous = {sig: signal.signal(sig, _raise_interrupt) for sig in (signal.SIGINT, signal.SIGTERM)} \
        if threading.current_thread() is threading.main_thread() else {}
    try:
        executor.run_arms(CampaignRun(campaign, run_dir, resolved, manifest, steps, progress, log), arms)
        steps.set_postfix_str("analysis")
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


def run_analysis(run_dir: RunDir, manifest: ManifestFile) -> None:
    out = run_dir.analysis_notebook
    try:
        secs = execute_notebook(ANALYSIS_NOTEBOOK, out, {"run_dir": str(run_dir)})
        manifest.data["analysis"] = {"status": "ok", "seconds": round(secs, 1), "sha256": file_sha256(out)}
        write_report(out, run_dir.report)
    except Exception as err:  # the executed notebook keeps the traceback; the manifest says where
        manifest.data["analysis"] = {"status": "failed", "error": symbolic(str(err))[-3000:]}
        if not run_dir.analysis.exists():
            try:  # analysis.json is plain data: write it even when a figure failed the notebook
                from stackbook.analysis.comparison import write_analysis
                write_analysis(run_dir)
            except Exception as inner:  # noqa: BLE001 - the manifest already says the analysis failed
                manifest.data["analysis"]["error"] += f"; analysis.json not written: {symbolic(str(inner))[-500:]}"
    manifest.save()


def repetitions_began(reps: list[int], started_here: bool, ready_s: float | None) -> str:
    """How this call's repetitions began, in the passport's words."""
    fresh = (f"fresh engine start (the engine process started anew, ready after {ready_s:.1f} s; no process "
             "state of an earlier repetition carries over)" if started_here and ready_s is not None else
             "the engine the runner attached")
    if len(reps) == 1:
        return fresh
    return (f"repetition {reps[0]}: {fresh}; repetitions {', '.join(map(str, reps[1:]))}: the same engine process, "
            "the prefix cache prepared before every point as the protocol says")


def run_arm(campaign, arm, run_dir: RunDir, resolved: Path, entry: dict, save: Callable[[], None], steps,
            progress: bool, log, repetitions: list[int] | None = None) -> None:
    """One arm's slot: start its engine, execute its notebooks, stop the engine, write the passport.

    `repetitions` are the sweep repetitions this slot measures (None: the protocol's minimum, all
    in one engine process). The slot holding repetition 0 runs every stage; a later one only the
    sweep, with its own fresh engine start, and only once repetition 0 measured the arm.
    `entry` is the arm's manifest record, updated in place; `save` is called whenever it changed
    (the local executor rewrites the manifest, a Ray task ships the record and folder home)."""
    protocol = campaign.protocol_for(arm)
    reps = list(range(protocol.repetitions.min)) if repetitions is None else sorted(repetitions)
    done = set(entry.get("repetitions_done") or [])
    first_slot = 0 in reps
    if (entry["status"] == "complete" and set(reps) <= done) or (not first_slot and 0 not in done):
        steps.update(len(ARM_NOTEBOOKS) + 1 if first_slot else 1)
        return
    arm_dir = run_dir.arm(arm.name).create()
    needs_engine = bool({"canaries", "sweep"} & set(protocol.stages))
    stages = ("sizing", "canaries", "sweep") if first_slot else ("sweep",)
    notebooks = [STAGE_NOTEBOOK[st] for st in stages if st in protocol.stages]
    if first_slot:
        steps.update(len(ARM_NOTEBOOKS) - len(notebooks))
    adapter = adapter_for(campaign, arm, log_path=arm_dir.engine_log if needs_engine else None)
    t_arm = time.monotonic()
    entry.update(status="running", engine=arm.engine.kind, stages=list(protocol.stages))
    entry.pop("error", None)
    slot = ",".join(map(str, reps))
    entry["slots_begun"] = sorted(set(entry.get("slots_begun") or []) | {slot})
    save()
    if needs_engine:
        steps.set_postfix_str(f"{arm.name}: starting {arm.engine.kind}")
        entry["engine_starts"] = entry.get("engine_starts", 0) + 1
        try:
            adapter.start()
            adapter.wait_ready()
        except (EngineStartError, FileNotFoundError, OSError, RuntimeError) as err:
            adapter.stop()
            entry.update(status="failed", error=symbolic(str(err))[-2000:])
            save()
            log(f"arm {arm.name}: engine did not start: {err}")
            steps.update(len(notebooks) + 1)
            return
    # Each slot starts its engine once by design; a start beyond that is a restart.
    restarts = max(0, entry.get("engine_starts", 1) - len(entry["slots_begun"]))
    began = repetitions_began(reps, needs_engine, adapter.ready_after_s if needs_engine else None)
    try:
        if needs_engine:
            record_engine(adapter, arm_dir, restarts=restarts)
            entry["engine_ready_s"] = adapter.ready_after_s
        steps.update(1)
        for name in notebooks:
            out = arm_dir.notebook(name)
            if name != "30_load_sweep" and notebook_ok(entry, name, out):
                steps.update(1)
                continue
            if name == "30_load_sweep" and set(reps) <= done and notebook_ok(entry, name, out):
                steps.update(1)
                continue
            if name == "10_sizing" and arm.engine.sizing_skip_reason:
                entry["notebooks"][name] = {"status": "skipped", "reason": arm.engine.sizing_skip_reason}
                steps.update(1)
                continue
            if name == "30_load_sweep":
                canaries = (read_json(arm_dir.results, {}) or {}).get("canaries", {})
                if canaries.get("verdict") != "PASS" and not protocol.canaries.run_sweep_on_hold:
                    entry["notebooks"][name] = {"status": "skipped", "reason": f"canaries {canaries.get('verdict', 'missing')}"
                                                f"{': ' + canaries['reason'] if canaries.get('reason') else ''}; "
                                                "set protocol.canaries.run_sweep_on_hold to measure anyway"}
                    save()
                    steps.update(1)
                    continue
            steps.set_postfix_str(f"{arm.name}: {name}" + (f" (repetition {slot})" if name == "30_load_sweep" else ""))
            entry["notebooks"][name] = {"status": "running"}
            save()
            params = {"campaign_file": str(resolved), "run_dir": str(run_dir), "arm": arm.name,
                      "endpoint": adapter.base_url if needs_engine else None, "run_id": run_dir.name,
                      "start_engine": needs_engine}
            if name == "30_load_sweep":
                params |= {"repetitions": reps, "began": began}
            total = len(reps) * protocol.requests_per_repetition()
            try:
                with _RequestProgress(arm_dir.requests, total, f"{arm.name} requests",
                                      progress and name == "30_load_sweep"):
                    secs = execute_notebook(name, out, params)
                entry["notebooks"][name] = {"status": "ok", "seconds": round(secs, 1), "sha256": file_sha256(out)}
                if name == "30_load_sweep":
                    entry["repetitions_done"] = sorted(done | set(reps))
                    log_ = entry.setdefault("repetition_log", {})
                    for r in reps:
                        log_[str(r)] = {"began": began, "engine_start": entry.get("engine_starts"),
                                        "sweep_seconds": round(secs, 1), "finished_unix": time.time()}
            except Exception as err:  # papermill raises PapermillExecutionError with the cell's traceback
                entry["notebooks"][name] = {"status": "failed", "error": symbolic(str(err))[-3000:]}
                entry["status"] = "failed"
                if needs_engine and not adapter.is_alive():
                    entry["status"] = "engine_died"
                    entry["error"] = (f"the engine exited (code {adapter.proc.returncode}) during {name}; "
                                      "its records are kept, --resume restarts it and re-runs what was cut")
                save()
                log(f"arm {arm.name}: {name} failed: {entry.get('error') or str(err).splitlines()[-1:]}")
                break
            save()
            steps.update(1)
    except (RunInterrupted, KeyboardInterrupt):  # a signal here, or a Ray task cancelled on its node
        entry["status"] = "interrupted"
        raise
    finally:
        steps.set_postfix_str(f"{arm.name}: stopping engine")
        if needs_engine:
            # Capacity lines can arrive late in the log: record them once more before stopping.
            try:
                if adapter.is_alive():
                    record_engine(adapter, arm_dir, restarts=restarts)
            finally:  # a record that cannot be written (a full disk) must not leave the engine running
                entry["engine_exit_code"] = adapter.stop()
        write_passport(campaign, arm, arm_dir, engine_died=entry["status"] == "engine_died")
        if entry["status"] == "running":
            entry.update(arm_outcome(read_json(arm_dir.results, {}) or {}))
        entry["seconds"] = round(entry.get("seconds", 0) * (not first_slot) + time.monotonic() - t_arm, 1)
        save()


def arm_outcome(results: dict) -> dict:
    """How an arm that ran through its stages ended: "held" (with the gate's reason) when its
    canaries did not pass, so a skipped sweep is never reported as a complete arm."""
    canaries = results.get("canaries") or {}
    if canaries and canaries.get("verdict") != "PASS":
        return {"status": "held", "error": f"canaries {canaries.get('verdict')}: "
                                           f"{canaries.get('reason') or canaries.get('failed')}"}
    return {"status": "complete"}
