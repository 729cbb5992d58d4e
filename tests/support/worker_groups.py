"""How `make test`'s two pytest workers share the suite: every module that runs a real engine in one
group, run first and on one worker, so that engines run one at a time as they do alone; every other
module whole, on the other worker, on the core the engines leave idle.

The controller sees test ids, not markers, so a module belongs to the engine group when its source
marks tests `engine` (tests/engines, tests/chaos and the notebook test that runs one)."""
from __future__ import annotations

import functools
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling

ENGINE_GROUP = "engines"
ENGINE_MARK = "pytest.mark.engine"


@functools.cache
def runs_engines(module: str, root: Path) -> bool:
    path = root / module
    return path.suffix == ".py" and path.is_file() and ENGINE_MARK in path.read_text()


def scope_of(nodeid: str, root: Path) -> str:
    module = nodeid.split("::")[0]
    return ENGINE_GROUP if runs_engines(module, root) else module


class EngineGroupScheduling(LoadScopeScheduling):
    """Whole modules to whichever worker is free, the engine group first."""

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid, self.config.rootpath)

    def _assign_work_unit(self, node) -> None:
        if ENGINE_GROUP in self.workqueue:
            self.workqueue.move_to_end(ENGINE_GROUP, last=False)
        super()._assign_work_unit(node)
