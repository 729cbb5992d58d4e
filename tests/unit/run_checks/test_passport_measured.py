"""Passport fields that are measured, never constants: host instruction sets, GPUs by NVML,
energy from power samples, the cool-down as executed, and a sizing-only arm on catalog hardware."""
import json

import pytest
from stackbook.config.loading import parse_campaign
from stackbook.evidence.files import read_json
from stackbook.run_checks.passport import energy_of, write_passport
from stackbook.evidence.rundir import RunDir
from stackbook.host import accelerator_fields, host_identity, isa_flags
from stackbook.measure.telemetry import energy_joules

FLAGS = "flags\t\t: fpu sse2 avx avx2 fma f16c avx512f avx512bw avx512_bf16 amx_tile amx_bf16 amx_int8 avx_vnni\n"


def test_isa_flags_are_read_from_cpuinfo():
    assert isa_flags(FLAGS) == ["amx_bf16", "amx_int8", "amx_tile", "avx2", "avx512_bf16", "avx512bw", "avx512f",
                                "avx_vnni", "f16c", "fma"]
    assert isa_flags("unknown\n") == []
    host = host_identity()
    assert host["isa_flags"] == isa_flags() and host["physical_cores"] >= 1 and host["memory_gib"] > 0
    assert host["accelerator"] != "none (CPU)"


def test_accelerator_fields_say_what_nvml_found():
    absent = accelerator_fields({"nvml": "absent", "gpus": [],
                                 "reason": "no NVIDIA GPU found by NVML (Shared Library Not Found)"})
    assert absent == {"accelerator": "none: no NVIDIA GPU found by NVML (Shared Library Not Found)",
                      "driver": "not applicable: no NVIDIA GPU found by NVML (Shared Library Not Found)"}
    found = accelerator_fields({"nvml": "present", "driver": "570.86.15", "cuda": "12.8",
                                "gpus": [{"index": 0, "name": "NVIDIA H200", "memory_gib": 139.8}]})
    assert found["accelerator"] == "1 x NVIDIA H200 (139.8 GiB)"
    assert found["driver"] == "NVIDIA 570.86.15, CUDA 12.8"


def test_energy_is_integrated_from_power_samples():
    samples = [{"t": 0.0, "power_w": 100.0}, {"t": 1.0, "power_w": 300.0}, {"t": 3.0, "power_w": 300.0}]
    assert energy_joules(samples) == pytest.approx(200 + 600)
    assert energy_of({"nvml": "present", "samples": 3, "gpus": {0: {"energy_j": 800.0}}}) == {
        "joules_total": 800.0, "joules_per_gpu": {"0": 800.0},
        "source": "NVML power samples, trapezoid rule (3 samples)"}
    counted = {"nvml": "present", "samples": 4,
               "gpus": {0: {"energy_j": 50.0, "energy_source": "the GPU's energy counter"}}}
    assert energy_of(counted)["source"] == "the GPU's energy counter (4 samples)"
    assert energy_of({"nvml": "absent", "reason": "no NVIDIA GPU here (NVML: Shared Library Not Found)"}) == {
        "unknown": "not measured: no NVIDIA GPU here (NVML: Shared Library Not Found)"}


def _campaign(**protocol):
    return parse_campaign({"name": "t", "hardware": {"accelerator": "a100-80gb"},
                           "model": {"source": "catalog", "catalog": "qwen3.8-27b"},
                           "protocol": {"stages": ["sizing"], **protocol},
                           "arms": [{"name": "a", "engine": {"kind": "vllm", "extra_args": ["--speculative-config",
                                                                                              '{"method": "mtp"}']}}]})


def test_a_sizing_only_arm_on_catalog_hardware_says_it_was_not_run(tmp_path):
    c = _campaign()
    arm = RunDir(tmp_path).arm("a").create()
    write_passport(c, c.arms[0], arm)
    p = read_json(arm.passport_json)
    assert p["identity"]["host"]["note"] == "sized for a100-80gb, not run"
    assert p["identity"]["host"]["sized_for"] == "a100-80gb"
    assert p["identity"]["speculative_decoder"] == '--speculative-config {"method": "mtp"}'
    assert p["identity"]["engine_build"] == {"unknown": "the engine was not started"}


def test_the_cooldown_is_what_each_arrival_pattern_sends(tmp_path):
    closed = _campaign(arrival={"kind": "closed_loop", "concurrency": [1, 4]})
    arm = RunDir(tmp_path).arm("a").create()
    write_passport(closed, closed.arms[0], arm)
    assert read_json(arm.passport_json)["protocol"]["cooldown_requests_per_point"] == {"c1": 0, "c4": 3}
    open_loop = _campaign(arrival={"kind": "poisson", "rates": [0.5, 2]}, warmup_requests=3)
    write_passport(open_loop, open_loop.arms[0], arm)
    assert json.loads(arm.passport_json.read_text())["protocol"]["cooldown_requests_per_point"] == {
        "rate0.5": 3, "rate2": 3}
