"""One arm's slot of a run: start its engine, execute its notebooks, stop the engine, write the
passport. Every executor (`stackbook.executors`) calls `run_arm` with an `ArmSlot`, so an arm does
the same thing wherever it runs."""
from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tqdm import tqdm

from stackbook.arm_stages import StageContext, slot_stages
from stackbook.config.campaign import Arm, Campaign
from stackbook.engines import EngineStartError
from stackbook.evidence.files import file_sha256, read_json
from stackbook.run_checks.passport import write_passport
from stackbook.evidence.rundir import ARM_NOTEBOOKS, RunDir
from stackbook.harness.delay_relay import RelayProcess
from stackbook.locations import symbolic
from stackbook.notebook_execution import execute_notebook
from stackbook.routing.deployment import Deployment, serving_for
from stackbook.steps.session import record_engine


class RunInterrupted(BaseException):
    """The runner was asked to stop (SIGINT or SIGTERM): engines are stopped, records kept."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclass(frozen=True)
class ArmSlot:
    """What one arm's slot needs: the campaign and the arm, the run directory and its resolved
    campaign file, the arm's manifest record (`entry`, updated in place) and `save`, called
    whenever it changed (the local executor rewrites the manifest, a Ray task ships the record and
    folder home), the progress bar, whether to show request progress, and the log.
    `repetitions` are the sweep repetitions this slot measures (None: the protocol's minimum, all
    in one engine process)."""
    campaign: Campaign
    arm: Arm
    run_dir: RunDir
    resolved: Path
    entry: dict
    save: Callable[[], None]
    steps: tqdm
    progress: bool
    log: Callable[[str], None]
    repetitions: list[int] | None = None


def _count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


class _RequestProgress:
    """A bar of requests completed, read from the arm's requests.jsonl while a notebook runs; the
    capacity search's requests (their total unknown beforehand) counted beside it."""

    def __init__(self, path: Path, total: int, desc: str, enabled: bool, search: Path | None = None):
        self.path, self.start = path, _count_lines(path)
        self.search, self.search_start = search, _count_lines(search) if search else 0
        self.bar = tqdm(total=total, desc=desc, unit="req", leave=False, disable=not enabled)
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.wait(0.5):
            n = min(self.bar.total, _count_lines(self.path) - self.start)
            if n != self.bar.n:
                self.bar.update(n - self.bar.n)
            searched = _count_lines(self.search) - self.search_start if self.search else 0
            if searched:
                self.bar.set_postfix_str(f"capacity search: {searched} requests")

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(2)
        self.bar.close()


def repetitions_began(reps: list[int], started_here: bool, ready_s: float | None) -> str:
    """How this call's repetitions began, in the passport's words."""
    fresh = (f"fresh engine start (the engine process started anew, ready after {ready_s:.1f} s; no process "
             "state of an earlier repetition carries over)" if started_here and ready_s is not None else
             "the engine the runner attached")
    if len(reps) == 1:
        return fresh
    return (f"repetition {reps[0]}: {fresh}; repetitions {', '.join(map(str, reps[1:]))}: the same engine process, "
            "the prefix cache prepared before every point as the protocol says")


def slot_steps(first_slot: bool) -> int:
    """Progress steps one slot counts: its engine start, then each notebook it runs (every arm
    notebook in the slot holding repetition 0, the sweep alone in a later one)."""
    return 1 + (len(ARM_NOTEBOOKS) if first_slot else 1)


def campaign_steps(arms: int, repetitions: int) -> int:
    """Steps of a run: every arm's slots (one per repetition) and the analysis."""
    return arms * (slot_steps(True) + (repetitions - 1) * slot_steps(False)) + 1


def run_arm(slot: ArmSlot) -> None:
    """One arm's slot: start its engine, execute its notebooks, stop the engine, write the passport.

    The slot holding repetition 0 runs every stage; a later one only the sweep, with its own fresh
    engine start, and only once repetition 0 measured the arm. The steps are `_SlotRun`'s; this
    wrapper keeps their order and the bookkeeping that must happen whatever they do."""
    run = _SlotRun(slot)
    if run.already_done():
        return
    run.begin()
    if not run.start_serving():
        return
    try:
        run.open_endpoint()
        for stage in run.stages:
            if not run.execute(stage):
                break
    except (RunInterrupted, KeyboardInterrupt):  # a signal here, or a Ray task cancelled on its node
        run.entry["status"] = "interrupted"
        raise
    finally:
        run.finish()


class _SlotRun:
    """The named steps of one slot, each keeping the arm's manifest record (`entry`) as it goes."""

    def __init__(self, slot: ArmSlot):
        self.slot, self.arm, self.entry = slot, slot.arm, slot.entry
        self.protocol = slot.campaign.protocol_for(slot.arm)
        self.reps = list(range(self.protocol.repetitions.min)) if slot.repetitions is None else sorted(slot.repetitions)
        self.done = set(self.entry.get("repetitions_done") or [])
        self.first_slot = 0 in self.reps
        self.relay: RelayProcess | None = None
        self.endpoint: str | None = None
        self.restarts = 0

    def already_done(self) -> bool:
        """Every repetition of this slot measured, or a later slot before repetition 0: nothing to run."""
        finished = self.entry["status"] == "complete" and set(self.reps) <= self.done
        if finished or (not self.first_slot and 0 not in self.done):
            self.slot.steps.update(slot_steps(self.first_slot))
            return True
        return False

    def begin(self) -> None:
        slot, entry = self.slot, self.entry
        self.needs_engine = bool({"canaries", "sweep"} & set(self.protocol.stages))
        self.stages = slot_stages(self.protocol.stages, self.first_slot)
        self.arm_dir = slot.run_dir.arm(self.arm.name).create()
        if self.first_slot:
            slot.steps.update(len(ARM_NOTEBOOKS) - len(self.stages))
        self.adapter = serving_for(slot.campaign, self.arm,  # or its replicas behind their router
                                   log_path=self.arm_dir.engine_log if self.needs_engine else None)
        self.t_arm = time.monotonic()
        entry.update(status="running", engine=self.arm.engine.kind, stages=list(self.protocol.stages))
        entry.pop("error", None)
        entry["slots_begun"] = sorted(set(entry.get("slots_begun") or []) | {",".join(map(str, self.reps))})
        slot.save()

    def start_serving(self) -> bool:
        """The engine started and ready (nothing to start for a sizing-only arm); False: it did not."""
        slot, entry = self.slot, self.entry
        if self.needs_engine:
            slot.steps.set_postfix_str(f"{self.arm.name}: starting {self.arm.engine.kind}")
            entry["engine_starts"] = entry.get("engine_starts", 0) + 1
            try:
                self.adapter.start()
                self.adapter.wait_ready()
            except (EngineStartError, FileNotFoundError, OSError, RuntimeError) as err:
                self.adapter.stop()
                entry.update(status="failed", error=symbolic(str(err))[-2000:])
                slot.save()
                slot.log(f"arm {self.arm.name}: engine did not start: {err}")
                slot.steps.update(len(self.stages) + 1)
                return False
        # Each slot starts its engine once by design; a start beyond that is a restart.
        self.restarts = max(0, entry.get("engine_starts", 1) - len(entry["slots_begun"]))
        self.ctx = StageContext(self.arm, self.arm_dir, entry, self.protocol, self.reps, self.done,
                                repetitions_began(self.reps, self.needs_engine,
                                                  self.adapter.ready_after_s if self.needs_engine else None))
        return True

    def open_endpoint(self) -> None:
        """The URL the notebooks send to: the engine's, or the delay relay's in front of it for a
        known-effect arm; the serving recorded."""
        if self.needs_engine and self.arm.known_delay:
            self.relay = RelayProcess(self.adapter.base_url, self.arm.known_delay.tpot_ms).start()
        self.endpoint = self.relay.url if self.relay else self.adapter.base_url
        if self.needs_engine:
            record_serving(self.adapter, self.arm_dir, restarts=self.restarts, relay=self.relay)
            self.entry["engine_ready_s"] = self.adapter.ready_after_s
        self.slot.steps.update(1)

    def execute(self, stage) -> bool:
        """One notebook of the slot, kept, skipped or executed; False: it failed and the slot stops."""
        slot, entry, ctx = self.slot, self.entry, self.ctx
        out = self.arm_dir.notebook(stage.notebook)
        if stage.kept(ctx, out):
            slot.steps.update(1)
            return True
        if (reason := stage.skip_reason(ctx)) is not None:
            entry["notebooks"][stage.notebook] = {"status": "skipped", "reason": reason}
            slot.save()
            slot.steps.update(1)
            return True
        slot.steps.set_postfix_str(stage.label(ctx))
        entry["notebooks"][stage.notebook] = {"status": "running"}
        slot.save()
        params = {"campaign_file": str(slot.resolved), "run_dir": str(slot.run_dir), "arm": self.arm.name,
                  "endpoint": self.endpoint if self.needs_engine else None, "run_id": slot.run_dir.name,
                  "start_engine": self.needs_engine} | stage.params(ctx)
        total = len(self.reps) * self.protocol.requests_per_repetition()
        try:
            with _RequestProgress(self.arm_dir.requests, total, f"{self.arm.name} requests",
                                  slot.progress and stage.measures,
                                  self.arm_dir.capacity_requests if self.protocol.capacity else None):
                secs = execute_notebook(stage.notebook, out, params)
            entry["notebooks"][stage.notebook] = {"status": "ok", "seconds": round(secs, 1),
                                                  "sha256": file_sha256(out)}
            stage.finished(ctx, secs, {"engine_start": entry.get("engine_starts"),
                                       "engine_ready_s": self.adapter.ready_after_s if self.needs_engine else None})
        except Exception as err:  # papermill raises PapermillExecutionError with the cell's traceback
            entry["notebooks"][stage.notebook] = {"status": "failed", "error": symbolic(str(err))[-3000:]}
            entry["status"] = "failed"
            if self.needs_engine and not self.adapter.is_alive():
                entry["status"] = "engine_died"
                entry["error"] = (f"the engine exited (code {self.adapter.proc.returncode}) during {stage.notebook}; "
                                  "its records are kept, --resume restarts it and re-runs what was cut")
            slot.save()
            slot.log(f"arm {self.arm.name}: {stage.notebook} failed: "
                     f"{entry.get('error') or str(err).splitlines()[-1:]}")
            return False
        slot.save()
        slot.steps.update(1)
        return True

    def finish(self) -> None:
        """The engine stopped (its late capacity lines recorded first), the passport written, the
        arm's outcome and time kept: whatever the steps before did."""
        slot, entry = self.slot, self.entry
        slot.steps.set_postfix_str(f"{self.arm.name}: stopping engine")
        if self.needs_engine:
            try:
                if self.adapter.is_alive():
                    record_serving(self.adapter, self.arm_dir, restarts=self.restarts, relay=self.relay)
            finally:  # a record that cannot be written (a full disk) must not leave the engine running
                if self.relay:
                    self.relay.stop()
                entry["engine_exit_code"] = self.adapter.stop()
        write_passport(slot.campaign, self.arm, self.arm_dir, engine_died=entry["status"] == "engine_died")
        if entry["status"] == "running":
            entry.update(arm_outcome(read_json(self.arm_dir.results, {}) or {}))
        entry["seconds"] = round(entry.get("seconds", 0) * (not self.first_slot) + time.monotonic() - self.t_arm, 1)
        slot.save()


def record_serving(serving, arm_dir, restarts: int = 0, relay=None) -> dict:
    """engine.json for what serves the arm: its engine, or its replicas behind their router."""
    if isinstance(serving, Deployment):
        return serving.record(arm_dir, record_engine(serving.replicas[0], arm_dir, restarts=restarts))
    return record_engine(serving, arm_dir, restarts=restarts, relay=relay)


def arm_outcome(results: dict) -> dict:
    """How an arm that ran through its stages ended: "held" (with the gate's reason) when its
    canaries did not pass, so a skipped sweep is never reported as a complete arm."""
    canaries = results.get("canaries") or {}
    if canaries and canaries.get("verdict") != "PASS":
        return {"status": "held", "error": f"canaries {canaries.get('verdict')}: "
                                           f"{canaries.get('reason') or canaries.get('failed')}"}
    return {"status": "complete"}
