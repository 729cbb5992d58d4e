"""An engine runs in its own process group, tied to the runner that started it: these are the
few verbs the adapter uses to start, signal and watch that group."""
from __future__ import annotations

import os
import signal


def die_with_parent() -> None:
    """In the child, before exec: ask Linux to send SIGTERM if the process that started the engine
    dies, even by SIGKILL, so no engine outlives its runner."""
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False
