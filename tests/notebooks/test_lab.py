"""`make lab`: JupyterLab in the workbook environment, the `stackbook` kernel the notebook sources
name, the command line that opens the quickstart reference analysis first, and a server that
answers over HTTP (as root here, where the tests run as root)."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from stackbook.lab import lab_command
from stackbook.locations import REPO_ROOT
from stackbook.notebook_sources import KERNELSPEC, load_notebook


def test_the_stackbook_kernel_is_registered_for_this_interpreter():
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec("stackbook")
    assert spec.display_name == "Python (stackbook)" and spec.language == "python"
    assert os.path.realpath(spec.argv[0]) == os.path.realpath(sys.executable)
    assert spec.argv[spec.argv.index("-m") + 1] == "ipykernel_launcher"
    assert load_notebook("40_analysis").metadata.kernelspec == KERNELSPEC == {
        "name": "stackbook", "display_name": "Python (stackbook)", "language": "python"}


def test_jupyterlab_and_jupytext_are_installed():
    out = subprocess.run([sys.executable, "-m", "jupyter", "lab", "--version"], capture_output=True, text=True,
                         check=True)
    assert int(out.stdout.strip().split(".")[0]) >= 4
    import jupytext  # noqa: F401  (JupyterLab opens notebooks/*.py as notebooks through it)


def test_make_lab_opens_the_quickstart_reference_analysis():
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    out = subprocess.run(["make", "--no-print-directory", "-n", "lab"], cwd=REPO_ROOT, env=env,
                         capture_output=True, text=True, check=True)
    reference = Path("outputs/quickstart/reference/40_analysis.ipynb")
    landing = reference if (REPO_ROOT / reference).exists() else Path("notebooks/40_analysis.py")
    assert out.stdout.splitlines() == [
        "bash tools/bootstrap.sh workbook",
        f".venv/bin/python -m stackbook.lab {landing} "]


def test_the_lab_command_allows_root_only_for_root():
    as_root = lab_command("x.ipynb", 9000, "t0k", euid=0, python="py")
    as_user = lab_command("x.ipynb", 9000, "t0k", euid=1000, python="py", open_browser=False)
    assert "--allow-root" in as_root and "--allow-root" not in as_user
    assert "--no-browser" in as_user and "--no-browser" not in as_root
    assert as_user[:4] == ["py", "-m", "jupyter", "lab"] and as_user[-1] == "x.ipynb"
    assert {"--ServerApp.port=9000", "--ServerApp.port_retries=0", "--IdentityProvider.token=t0k"} <= set(as_user)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str):
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.load(r)


def test_lab_answers_over_http_with_the_landing_notebook_and_the_stackbook_kernel():
    """What `make lab` runs after its set-up, on a free port without a browser: it prints the URL
    with its token, serves the landing notebook and lists the stackbook kernel, and stops on SIGTERM."""
    port = _free_port()
    landing = "notebooks/40_analysis.py"
    proc = subprocess.Popen([sys.executable, "-m", "stackbook.lab", landing, f"--port={port}", "--no-browser"],
                            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True)
    try:
        line = proc.stdout.readline()
        m = re.fullmatch(rf"JupyterLab is open at http://127\.0\.0\.1:{port}/lab/tree/{re.escape(landing)}"
                         r"\?token=(\w+)\n", line)
        assert m, line
        token = m.group(1)
        base = f"http://127.0.0.1:{port}"
        notebook = _get(f"{base}/api/contents/{landing}?token={token}&type=notebook")
        assert notebook["type"] == "notebook" and notebook["format"] == "json"
        assert notebook["content"]["cells"][0]["source"].startswith("# 40 · Campaign analysis")
        kernels = _get(f"{base}/api/kernelspecs?token={token}")["kernelspecs"]
        assert kernels["stackbook"]["spec"]["display_name"] == "Python (stackbook)"
        try:
            urllib.request.urlopen(f"{base}/api/kernelspecs", timeout=10)
            raise AssertionError("the server answered without its token")
        except urllib.error.HTTPError as err:
            assert err.code == 403
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        t = time.monotonic()
        assert proc.wait(30) == 0 or proc.returncode == -signal.SIGTERM
        assert time.monotonic() - t < 30
