"""The local executor: every arm on this machine, one engine at a time, repetitions interleaved
across arms round by round (see executors.rounds)."""
from __future__ import annotations

import time

from stackbook.arm_run import ArmSlot, run_arm
from stackbook.run_checks.passport import write_passport
from stackbook.executors.rounds import run_rounds


class LocalExecutor:
    name = "local"
    OPTIONS: tuple[str, ...] = ()

    def run_arms(self, run, arms: list) -> None:
        def slot(arm, repetitions: list[int]) -> None:
            entry = run.manifest.arm(arm.name)
            placement = entry.setdefault("placement", {"executor": self.name})
            placement.setdefault("started_unix", time.time())
            try:
                run_arm(ArmSlot(run.campaign, arm, run.run_dir, run.resolved, entry, run.manifest.save, run.steps,
                                run.progress, run.log, repetitions=repetitions))
            finally:
                placement["finished_unix"] = time.time()
                run.manifest.save()

        run_rounds(run, arms, slot)
        rewrite_passports(run, arms)


def rewrite_passports(run, arms: list) -> None:
    """Each arm's passport once more after the last round: how many repetitions ran and why they
    stopped is known only then."""
    for arm in arms:
        entry = run.manifest.arm(arm.name)
        if run.run_dir.arm(arm.name).exists():
            write_passport(run.campaign, arm, run.run_dir.arm(arm.name), engine_died=entry["status"] == "engine_died")
