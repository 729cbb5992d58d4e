"""`make setup-gpu` refuses where no GPU is found, with a message that says why and what to run
instead, and installs nothing. Run with a stand-in nvidia-smi (absent, or listing no GPU) so the
outcome does not depend on the machine the tests run on."""
import os
import subprocess

import pytest
from stackbook.locations import REPO_ROOT


@pytest.mark.parametrize("nvidia_smi", [None, "#!/bin/sh\necho 'No devices were found'\nexit 6\n"],
                         ids=["no nvidia-smi", "nvidia-smi lists no GPU"])
@pytest.mark.parametrize("step", ["gpu", "vllm-gpu", "sglang", "trtllm"])
def test_gpu_steps_refuse_without_a_gpu(step, nvidia_smi, tmp_path):
    if not (REPO_ROOT / ".venv" / "bin" / "python").exists():
        pytest.skip("the steps run stackbook setup-engine from the workbook .venv, which this checkout lacks")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    if nvidia_smi:
        (bindir / "nvidia-smi").write_text(nvidia_smi)
        (bindir / "nvidia-smi").chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}:/usr/bin:/bin", "STACKBOOK_CACHE": str(tmp_path / "cache")}
    r = subprocess.run(["bash", str(REPO_ROOT / "tools" / "bootstrap.sh"), step], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 3
    assert "need an NVIDIA GPU; nvidia-smi finds none on this machine" in r.stderr
    assert "The CPU engines install with make setup." in r.stderr
    assert list((tmp_path / "cache" / "engines").iterdir()) == []
