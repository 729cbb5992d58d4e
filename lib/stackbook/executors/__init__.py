"""Where a campaign's arms run. Each executor kind is one module with one class: a `name`, the
command-line options it takes (`OPTIONS`) and `run_arms(run, arms)`, which calls
`stackbook.arm_run.run_arm` for every arm wherever it places it. Only the chosen kind's module is
imported, so the local executor never imports Ray."""
from __future__ import annotations

import importlib
from typing import Protocol

from stackbook.executors.local import LocalExecutor

EXECUTORS = {
    "local": "stackbook.executors.local:LocalExecutor",
    "ray": "stackbook.executors.ray_cluster:RayExecutor",
}


class Executor(Protocol):
    name: str
    OPTIONS: tuple[str, ...]

    def run_arms(self, run, arms: list) -> None: ...


def executor_for(kind: str, **options) -> Executor:
    """The executor of that kind with the options given on the command line (None: not given)."""
    if kind not in EXECUTORS:
        raise ValueError(f"--executor {kind!r}: unknown executor; use one of {', '.join(EXECUTORS)}")
    module, cls_name = EXECUTORS[kind].split(":")
    cls = getattr(importlib.import_module(module), cls_name)
    given = {k: v for k, v in options.items() if v is not None}
    for key in given:
        if key not in cls.OPTIONS:
            owners = [k for k, path in EXECUTORS.items() if k != kind]
            raise ValueError(f"--{key.replace('_', '-')} does not apply to --executor {kind}; it belongs to "
                             f"--executor {' or '.join(owners)}")
    return cls(**given)


__all__ = ["EXECUTORS", "Executor", "LocalExecutor", "executor_for"]
