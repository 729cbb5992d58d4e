"""The local executor: every arm on this machine, one after another (no two engines share it)."""
from __future__ import annotations

import time


class LocalExecutor:
    name = "local"
    OPTIONS: tuple[str, ...] = ()

    def run_arms(self, run, arms: list) -> None:
        from stackbook.runner import run_arm

        for arm in arms:
            entry = run.manifest.arm(arm.name)
            ran_before = entry["status"] == "complete"
            if not ran_before:
                entry["placement"] = {"executor": self.name, "started_unix": time.time()}
            try:
                run_arm(run.campaign, arm, run.run_dir, run.resolved, entry, run.manifest.save, run.steps,
                        run.progress, run.log)
            finally:
                if not ran_before:
                    entry["placement"]["finished_unix"] = time.time()
                    run.manifest.save()
