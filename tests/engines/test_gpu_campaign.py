"""The prepared GPU run rehearsed on this CPU (`stackbook gpu-campaign --device cpu`): the same
command builds its small model, runs the two-arm transformers campaign through the workbook and
writes one folder whose summary states the attention each arm ran, memory beside the sizing and
why energy is not measured here. Whether the rehearsal ranks the two arms is the host's affair (on
two cores the client shares the CPU with the engine); the test asserts what the run states."""
import json
import os
import shutil
import subprocess
import sys

import pytest
from stackbook.evidence.rundir import RunDir
from stackbook.gpu_campaign import CAMPAIGN, KV_BLOCK_TOKENS, KV_BLOCKS
from stackbook.locations import REPO_ROOT

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def rehearsal(real_engines, tmp_path_factory, test_run_id):
    run = REPO_ROOT / RunDir.new(CAMPAIGN, test_run_id).path
    r = subprocess.run([sys.executable, "-m", "stackbook.cli", "gpu-campaign", "--device", "cpu", "--run-id", run.name],
                       capture_output=True, text=True, timeout=900, cwd=REPO_ROOT)
    yield r, run
    if not os.environ.get("STACKBOOK_KEEP_TEST_RUNS"):
        shutil.rmtree(run, ignore_errors=True)


def test_the_rehearsal_completes_in_one_folder(rehearsal):
    r, run = rehearsal
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert {"model", "canaries.yaml", "campaign.yaml", "manifest.json", "gpu_summary.json", "report.html"} <= {
        p.name for p in run.iterdir()}
    s = json.loads((run / "gpu_summary.json").read_text())
    assert (s["status"], s["device"], s["accelerator"]) == ("complete", "cpu", "this-cpu")
    assert s["model"]["bytes"] < 64 * 2**20 and s["model"]["num_hidden_layers"] == 2


def test_each_arm_ran_its_own_attention_on_the_cpu(rehearsal):
    s = json.loads((rehearsal[1] / "gpu_summary.json").read_text())["arms"]
    assert s["sdpa"]["attention"].startswith("sdpa") and s["eager"]["attention"].startswith("paged|eager")
    assert {a["device"] for a in s.values()} == {"cpu"}
    for arm in ("sdpa", "eager"):  # the gate random weights can pass: greedy decoding repeats exactly
        canaries = json.loads((rehearsal[1] / "arms" / arm / "results.json").read_text())["canaries"]
        assert canaries["verdict"] == "PASS" and canaries["suite"] == "random-weights"
    for arm in s.values():
        assert {p["point"] for p in arm["points"]} == {"c1-r0", "c4-r0", "c1-r1", "c4-r1"}
        assert all(p["output_tok_s"] > 0 for p in arm["points"])
        assert all(p["energy"].startswith("not measured: no NVIDIA GPU here") for p in arm["points"])


def test_memory_stands_beside_the_sizing_of_weights_and_the_paged_pool(rehearsal):
    run = rehearsal[1]
    for name, arm in json.loads((run / "gpu_summary.json").read_text())["arms"].items():
        sizing = json.loads((run / "arms" / name / "results.json").read_text())["sizing"]
        m = arm["memory"]
        assert m["kv_pool_bytes"] == KV_BLOCKS * KV_BLOCK_TOKENS * sizing["kv_bytes_per_token"]
        assert m["predicted_bytes"] == sizing["weights_bytes"] + m["kv_pool_bytes"]
        # the engine's process holds more than the prediction: the runtime itself is not sized
        assert m["realized_bytes"] > m["predicted_bytes"] and "resident" in m["realized_is"]
