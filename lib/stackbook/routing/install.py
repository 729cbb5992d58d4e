"""Set-up's router step: every router kind that runs a process, installed into its own environment
in the cache (`tools/bootstrap.sh router`); one already installed is skipped, so the step is
idempotent."""
from __future__ import annotations

import sys

from stackbook.engines.install import InstallContext, InstallFailed, log
from stackbook.routing.registry import installable


def install_routers() -> int:
    """Install what is missing; the exit status the set-up step gives."""
    ctx = InstallContext.current()
    for kind in installable():
        if kind.is_installed():
            continue
        try:
            kind.install(ctx)
        except InstallFailed as err:
            if str(err):
                log(f"router {kind.kind}: {err}")
            return err.code
        log(f"router {kind.kind}: ready ({kind.installs})")
    return 0


if __name__ == "__main__":
    sys.exit(install_routers())
