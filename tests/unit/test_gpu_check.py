"""benchmarks/gpu_check.sh refuses without a GPU; its Python part writes the fixed format and says
why each measurement is missing where it cannot be taken (run here with NVML hidden)."""
import json
import os
import subprocess
import sys

from stackbook.engines.registry import gpu_kinds
from stackbook.locations import REPO_ROOT


def test_the_shell_check_refuses_without_a_gpu(tmp_path):
    env = {**os.environ, "PATH": f"{tmp_path}:/usr/bin:/bin"}
    r = subprocess.run(["bash", str(REPO_ROOT / "benchmarks" / "gpu_check.sh")], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 3 and "the GPU check needs an NVIDIA GPU" in r.stderr


def test_the_output_format_without_a_gpu(tmp_path):
    out = tmp_path / "check.json"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "lib"), "STACKBOOK_CACHE": str(tmp_path / "cache"),
           "LD_LIBRARY_PATH": str(tmp_path)}
    r = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "gpu_check.py"), "--out", str(out),
                        "--load-seconds", "0.2"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    d = json.loads(out.read_text())
    assert d["format"] == "stackbook-gpu-check/1"
    assert set(d) == {"format", "started_unix", "host", "platform", "identity", "hbm_bandwidth",
                      "telemetry_during_load", "engines", "seconds"}
    if d["identity"]["nvml"] == "absent":
        assert d["telemetry_during_load"]["nvml"] == "absent" and d["telemetry_during_load"]["load"] == "none (idle)"
    assert d["hbm_bandwidth"]["measured"] is False and d["hbm_bandwidth"]["reason"]
    assert set(d["engines"]) == set(gpu_kinds()) == {"vllm", "sglang", "trtllm"}
    assert d["engines"]["trtllm"] == {
        "environment": "$STACKBOOK_CACHE/engines/tensorrt-llm-1.2.1", "installed": False, "pinned_version": "1.2.1",
        "hint": "$STACKBOOK_CACHE/engines/tensorrt-llm-1.2.1/bin/python is missing; run `make setup-gpu` (or "
                "tools/bootstrap.sh trtllm) to install TensorRT-LLM 1.2.1 into its own environment, on a machine "
                "with an NVIDIA GPU"}
