"""`stackbook setup-engine`: install engine kinds into the cache, each by its own recipe, skipping
those already there; tools/bootstrap.sh calls it for the engines a make target needs."""
from __future__ import annotations

import sys
from typing import Optional

import typer

from stackbook.cli_common import fail as _fail
from stackbook.engines.registry import ADAPTERS

# The kinds set-up installs, as the help names them.
INSTALLABLE = " ".join(a.kind for a in ADAPTERS.values() if a.bootstrap_step)


def setup_engine(kinds: Optional[list[str]] = typer.Argument(None, help=f"engine kinds: {INSTALLABLE}"),
                 target: Optional[str] = typer.Option(None, "--target", help="every kind this make target needs, "
                                                      "installed in parallel (quickstart, setup-gpu)"),
                 needs_compiler: bool = typer.Option(False, "--needs-compiler", help="install nothing; exit 0 when a "
                                                     "kind still to install "
                                                     "builds from source, 1 when none does")) -> None:
    """Install engine kinds into $STACKBOOK_CACHE/engines; an installed one is skipped."""
    from stackbook.engines.install import InstallContext, InstallFailed, install_in_parallel, log, require_gpu, together
    from stackbook.engines.registry import adapter_class

    if bool(kinds) == bool(target):
        _fail(f"name engine kinds or give --target, not both, e.g. `stackbook setup-engine {INSTALLABLE.split()[0]}` "
              "or `stackbook setup-engine --target quickstart`")
    if target:
        selected = [a for a in ADAPTERS.values() if a.bootstrap_step and a.setup_target == target]
        if not selected:
            targets = sorted({a.setup_target for a in ADAPTERS.values() if a.bootstrap_step})
            _fail(f"--target {target!r}: no engine kind installs with it; targets: {', '.join(targets)}")
    else:
        by_step = {a.bootstrap_step: a for a in ADAPTERS.values() if a.bootstrap_step}
        try:  # a kind, or its bootstrap step's name (tools/bootstrap.sh llama)
            selected = [by_step.get(kind) or adapter_class(kind) for kind in kinds]
        except KeyError as err:
            _fail(f"{err.args[0]}; or a set-up step: {', '.join(by_step)}")
        for adapter in selected:
            if adapter.bootstrap_step is None:
                _fail(f"{adapter.kind} is not installed by set-up: {adapter.install_hint()}")
    if needs_compiler:
        raise typer.Exit(0 if any(a.builds_from_source and not a.is_installed() for a in selected) else 1)
    try:
        if target == "setup-gpu":
            require_gpu()  # refused before anything is installed
        ctx = InstallContext.current()
        if all(a.is_installed() for a in selected):
            log(f"engines: {', '.join(a.kind for a in selected)} already installed in {ctx.engines}")
            return
        if target:
            steps = [a.bootstrap_step for a in selected]
            log(f"engines: {together([a.install_label for a in selected])} run in parallel; progress in "
                f"{ctx.logs}/{{{','.join(steps)}}}.log")
            if not install_in_parallel(steps, [a.kind for a in selected], ctx,
                                       lambda kind: [sys.executable, "-m", "stackbook.cli", "setup-engine", kind]):
                raise typer.Exit(1)
            return
        for adapter in selected:
            if not adapter.is_installed():
                adapter.install(ctx)
    except InstallFailed as err:
        if str(err):
            _fail(str(err), err.code)
        raise typer.Exit(err.code) from None
