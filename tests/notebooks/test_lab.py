"""`make lab`: JupyterLab in the workbook environment, the `stackbook` kernel the notebook sources
name, and the command line that opens the quickstart reference analysis first."""
import os
import subprocess
import sys
from pathlib import Path

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
        f".venv/bin/python -m jupyter lab --ServerApp.root_dir={REPO_ROOT} {landing}"]
