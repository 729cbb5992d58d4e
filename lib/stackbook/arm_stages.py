"""An arm's stages as typed steps. Each stage knows its notebook, when a resumed run keeps what
it already wrote, why it may be skipped, what it adds to the notebook's parameters and what it
records once done; `arm_run.run_arm` walks them without asking which one it holds."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from stackbook.config.campaign import Arm
from stackbook.evidence.files import read_json
from stackbook.evidence.rundir import STAGE_NOTEBOOK, ArmDir
from stackbook.notebook_execution import notebook_ok


@dataclass
class StageContext:
    """What a stage reads of its slot: the arm, its folder and manifest record, the protocol, the
    repetitions this slot measures and those measured before, and how the repetitions began."""
    arm: Arm
    arm_dir: ArmDir
    entry: dict
    protocol: object
    reps: list[int]
    done: set[int] = field(default_factory=set)
    began: str = ""


class ArmStage:
    """A stage whose notebook runs once per arm (in the slot holding repetition 0)."""
    name: ClassVar[str]
    measures: ClassVar[bool] = False  # sends the measured load: request progress, per-slot repetitions

    @property
    def notebook(self) -> str:
        return STAGE_NOTEBOOK[self.name]

    def label(self, ctx: StageContext) -> str:
        return f"{ctx.arm.name}: {self.notebook}"

    def kept(self, ctx: StageContext, out: Path) -> bool:
        """Already executed whole by an earlier call of this run (resume keeps it)."""
        return notebook_ok(ctx.entry, self.notebook, out)

    def skip_reason(self, ctx: StageContext) -> str | None:
        return None

    def params(self, ctx: StageContext) -> dict:
        return {}

    def finished(self, ctx: StageContext, seconds: float, engine: dict) -> None:
        """Bookkeeping once the notebook ran through."""


class SizingStage(ArmStage):
    name = "sizing"

    def skip_reason(self, ctx: StageContext) -> str | None:
        return ctx.arm.engine.sizing_skip_reason


class CanariesStage(ArmStage):
    name = "canaries"


class SweepStage(ArmStage):
    """The measured load: runs in every slot for that slot's repetitions, and only behind a passed
    gate unless the protocol measures on hold."""
    name = "sweep"
    measures = True

    def label(self, ctx: StageContext) -> str:
        return f"{super().label(ctx)} (repetition {','.join(map(str, ctx.reps))})"

    def kept(self, ctx: StageContext, out: Path) -> bool:
        return set(ctx.reps) <= ctx.done and super().kept(ctx, out)

    def skip_reason(self, ctx: StageContext) -> str | None:
        canaries = (read_json(ctx.arm_dir.results, {}) or {}).get("canaries", {})
        if canaries.get("verdict") == "PASS" or ctx.protocol.canaries.run_sweep_on_hold:
            return None
        return (f"canaries {canaries.get('verdict', 'missing')}"
                f"{': ' + canaries['reason'] if canaries.get('reason') else ''}; "
                "set protocol.canaries.run_sweep_on_hold to measure anyway")

    def params(self, ctx: StageContext) -> dict:
        return {"repetitions": ctx.reps, "began": ctx.began}

    def finished(self, ctx: StageContext, seconds: float, engine: dict) -> None:
        ctx.entry["repetitions_done"] = sorted(ctx.done | set(ctx.reps))
        log = ctx.entry.setdefault("repetition_log", {})
        for r in ctx.reps:
            log[str(r)] = {"began": ctx.began, **engine, "sweep_seconds": round(seconds, 1),
                           "finished_unix": time.time()}


STAGES: dict[str, ArmStage] = {s.name: s for s in (SizingStage(), CanariesStage(), SweepStage())}


def slot_stages(stages: list[str], first_slot: bool) -> list[ArmStage]:
    """The stages one slot runs, in order: every stage the protocol names in the slot holding
    repetition 0, the measuring ones alone in a later slot."""
    return [STAGES[s] for s in STAGES if s in stages and (first_slot or STAGES[s].measures)]
