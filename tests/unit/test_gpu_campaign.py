"""The prepared GPU run's pure parts: the accelerator a CUDA name sizes for, the two arms it
compares, energy per output token from a point's GPU window, and memory beside the sizing; and
the refusal, exit 3, where the GPU run finds no CUDA (the CPU rehearsal is tests/engines/test_gpu_campaign.py)."""
import os
import subprocess
import sys

import pytest
from stackbook.config.campaign import Campaign
from stackbook.gpu_campaign import ATTENTIONS, KV_BLOCK_TOKENS, KV_BLOCKS, accelerator_for, campaign_for, \
    memory_against_sizing, point_energy
from stackbook.loadgen.records import RequestRecord
from stackbook.locations import REPO_ROOT
from stackbook.measure.telemetry import gpu_window


def test_a_cuda_name_sizes_for_its_catalog_entry():
    assert accelerator_for("NVIDIA H200") == "h200"
    assert accelerator_for("NVIDIA A100-SXM4-80GB") == "a100-80gb"
    assert accelerator_for(None) == "this-cpu"
    with pytest.raises(ValueError, match="not in the accelerator catalog.*--accelerator"):
        accelerator_for("NVIDIA T4")


def test_the_two_arms_differ_only_in_attention(tmp_path):
    model = REPO_ROOT / "outputs" / "x" / "model"
    c = campaign_for(model, "cuda", "h200", "/opt/py/bin/python")
    engines = [a["engine"] for a in c["arms"]]
    assert [e.pop("attn_implementation") for e in engines] == list(ATTENTIONS)
    assert engines[0] == engines[1] == {"kind": "transformers", "device": "cuda", "cb_num_blocks": KV_BLOCKS,
                                        "cb_block_size": KV_BLOCK_TOKENS, "python": "/opt/py/bin/python"}
    assert c["model"]["hf_path"] == "outputs/x/model" and "stages" not in c["protocol"]  # sizing, the gate, the load
    assert c["protocol"]["canaries"] == {"suite": "outputs/x/canaries.yaml", "sentinel_share": 0}
    c["model"]["hf_path"] = str(tmp_path)  # validated against a real folder
    assert Campaign.model_validate(c).protocol.repetitions.min == 2
    assert c["protocol"]["requests_per_point"] == 48  # the rehearsal on the CPU sends fewer
    assert campaign_for(model, "cpu", "this-cpu", None)["protocol"]["requests_per_point"] == 30


def test_energy_comes_from_the_counter_where_the_card_keeps_one_else_from_power():
    counted = [{"t": t, "gpu": 0, "memory_used_gib": 1 + t, "utilization_pct": 50, "power_w": 100.0,
                "energy_mj": 5_000 + 250_000 * t} for t in (0.0, 1.0, 2.0)]
    assert gpu_window(counted) == {"samples": 3, "memory_used_gib_peak": 3.0, "power_w_mean": 100.0,
                                        "energy_j": 500.0, "energy_source": "the GPU's energy counter"}
    powered = [{k: v for k, v in s.items() if k != "energy_mj"} for s in counted]
    assert gpu_window(powered)["energy_j"] == 200.0  # 100 W for 2 s
    assert gpu_window(powered)["energy_source"].startswith("NVML power samples")


def _record(tokens: int, ok: bool = True) -> RequestRecord:
    return RequestRecord(run_id="r", arm="sdpa", point="c1-r0", phase="measure", concurrency=1, request_index=0,
                         scheduled_s=0, sent_s=0, end_s=1, sent_unix=0, prompt_tokens_client=64,
                         output_tokens_server=tokens, output_tokens_requested=32, status=200 if ok else 500,
                         error_class="none" if ok else "http_error")


def test_energy_per_output_token_counts_the_tokens_answered_in_the_point():
    point = {"gpu_during": {"nvml": "present", "gpus": {0: {"energy_j": 64.0, "memory_used_gib_peak": 2.5,
                                                               "energy_source": "the GPU's energy counter"}}}}
    e = point_energy(point, [_record(32), _record(32), _record(32, ok=False)])
    assert (e["energy_j"], e["output_tokens"], e["joules_per_output_token"]) == (64.0, 64, 1.0)
    absent = {"gpu_during": {"nvml": "absent", "reason": "no NVIDIA GPU here"}}
    assert point_energy(absent, [_record(32)]) == {"energy": "not measured: no NVIDIA GPU here"}


def test_memory_beside_the_sizing_names_what_the_prediction_leaves_out():
    results = {"sizing": {"weights_bytes": 6_000_000, "predicted_capacity": {"kv_pool_bytes": 1_000_000}},
               "sweep": {"peak_engine_rss_gib": 1.0}}
    gpu = memory_against_sizing(results, [{"gpu_memory_gib_peak": 0.5}, {"gpu_memory_gib_peak": 0.75}], on_gpu=True)
    assert (gpu["predicted_bytes"], gpu["realized_bytes"]) == (7_000_000, 0.75 * 2**30)
    assert gpu["realized_minus_predicted_bytes"] == 0.75 * 2**30 - 7_000_000 and "CUDA context" in gpu["not_predicted"]
    cpu = memory_against_sizing(results, [], on_gpu=False)
    assert cpu["realized_bytes"] == 2**30 and "resident" in cpu["realized_is"]


@pytest.mark.skipif(os.path.exists("/dev/nvidia0"), reason="a CUDA host runs the GPU campaign itself")
def test_the_gpu_run_without_cuda_says_so_and_exits_3():
    r = subprocess.run([sys.executable, "-m", "stackbook.cli", "gpu-campaign", "--python", sys.executable],
                       capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "no CUDA device here" in r.stdout and "--device cpu" in r.stdout


def test_the_sweep_summary_reads_each_gpu_as_a_point_window_does_plus_its_peaks():
    from stackbook.measure.telemetry import GpuSampler
    sampler = GpuSampler()
    sampler.samples = [{"t": t, "gpu": 0, "memory_used_gib": 2.0, "utilization_pct": u, "power_w": p,
                        "energy_mj": 1_000 * t} for t, u, p in ((0.0, 40, 100.0), (2.0, 60, 300.0))]
    gpu = sampler.summary()["gpus"][0]
    assert gpu == gpu_window(sampler.samples) | {"power_w_peak": 300.0, "utilization_pct_mean": 50.0}
    assert (gpu["energy_j"], gpu["energy_source"]) == (2.0, "the GPU's energy counter")
    assert sampler.window(1.0, 3.0)["gpus"][0]["samples"] == 1
