"""A kind from a package outside this repository: installed beside the workbook (a distribution on
the path with its metadata, as pip leaves one), it registers through the `stackbook.engines` entry
point, a campaign accepts it, and its engine starts, answers and stops through the same machinery."""
import json
import os
import subprocess
import sys

from stackbook.locations import REPO_ROOT

PLUGIN = REPO_ROOT / "tests" / "data" / "engine_plugin"

SCRIPT = """
import json, httpx
from stackbook.config.loading import parse_campaign
from stackbook.engines import adapter_for, engine_kinds
campaign = parse_campaign({"name": "p", "model": {"source": "remote", "name": "m"},
                           "arms": [{"name": "paced", "engine": {"kind": "paced_example", "gap_ms": 2}}]}, "p.yaml")
adapter = adapter_for(campaign, campaign.arms[0])
with adapter:
    r = httpx.post(adapter.base_url + "/v1/chat/completions", timeout=30,
                   json={"model": "m", "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]})
print(json.dumps({"kinds": engine_kinds(), "spec": type(campaign.arms[0].engine).__name__, "status": r.status_code,
                  "tokens": r.json()["usage"]["completion_tokens"], "exit": adapter.exit_code is not None}))
"""


def run(pythonpath: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    return subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120)


def test_an_installed_package_adds_a_kind_that_a_campaign_accepts_and_that_runs():
    done = run(str(PLUGIN))
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["kinds"][-1] == "paced_example" and "llama_cpp" in out["kinds"]
    assert out["spec"] == "PacedEngine"
    assert (out["status"], out["tokens"], out["exit"]) == (200, 3, True)


def test_without_the_package_the_kind_is_unknown_and_the_error_says_so():
    done = run("")
    assert done.returncode != 0
    assert "paced_example" in done.stderr and "llama_cpp" in done.stderr
