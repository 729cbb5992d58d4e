"""`make lab`: JupyterLab on the repository with the stackbook kernel, opened on one notebook.

JupyterLab refuses to start as root without `--allow-root` (containers and CI machines run as
root), and picks another port silently when its own is taken; so the command is built here, with
a token chosen up front and a fixed port, and the URL (token included) is printed once the server
answers."""
from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from urllib.parse import quote

from stackbook.locations import REPO_ROOT

DEFAULT_PORT = 8888


def lab_command(notebook: str, port: int, token: str, euid: int, open_browser: bool = True,
                python: str = sys.executable) -> list[str]:
    """The jupyter lab argv: rooted at the repository, on exactly `port`, `--allow-root` when the
    user is root."""
    argv = [python, "-m", "jupyter", "lab", f"--ServerApp.root_dir={REPO_ROOT}", f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", "--ServerApp.ip=127.0.0.1"]
    if euid == 0:
        argv.append("--allow-root")
    if not open_browser:
        argv.append("--no-browser")
    return argv + [notebook]


def lab_url(notebook: str, port: int, token: str) -> str:
    return f"http://127.0.0.1:{port}/lab/tree/{quote(notebook)}?token={token}"


def wait_until_answering(port: int, token: str, proc: subprocess.Popen, timeout_s: float = 120) -> None:
    """Poll the server's status API until it answers; a server that exits first is an error."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"jupyter lab exited with code {proc.returncode} before answering on port {port} "
                             f"(is the port taken? choose another: make lab LAB_ARGS=--port=N)")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"jupyter lab did not answer on port {port} within {timeout_s:.0f} s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stackbook.lab", description=__doc__.splitlines()[0])
    ap.add_argument("notebook", help="the notebook to open first, relative to the repository root")
    ap.add_argument("--port", type=int, default=int(os.environ.get("STACKBOOK_LAB_PORT", DEFAULT_PORT)))
    ap.add_argument("--no-browser", action="store_true", help="print the URL only (a host without a display)")
    a = ap.parse_args(argv)
    token = os.environ.get("JUPYTER_TOKEN") or secrets.token_hex(24)
    proc = subprocess.Popen(lab_command(a.notebook, a.port, token, os.geteuid(), not a.no_browser), cwd=REPO_ROOT)
    for sig in (signal.SIGINT, signal.SIGTERM):  # stopping make stops the server, not only this process
        signal.signal(sig, lambda signum, frame: proc.send_signal(signal.SIGTERM))
    try:
        wait_until_answering(a.port, token, proc)
        print(f"JupyterLab is open at {lab_url(a.notebook, a.port, token)}", flush=True)
        return proc.wait()
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(20)


if __name__ == "__main__":
    sys.exit(main())
