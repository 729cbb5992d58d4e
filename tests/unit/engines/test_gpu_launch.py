"""Each GPU arm of the committed campaigns is launched with what its sizing assumed: the KV and
recurrent-state precision the arithmetic charged, the context it sized for, and the engine's own
knobs its capacity rule applied (memory share, SGLang's pool split and scheduler strategy). The
flags are read back from the launch command and mapped to the protocol's names."""
from pathlib import Path

import pytest
import yaml
from stackbook import sizing
from stackbook.config.loading import load_campaign
from stackbook.engines import adapter_class
from stackbook.engines.registry import gpu_kinds
from stackbook.engines.spec import CapacityBasis
from stackbook.locations import REPO_ROOT
from stackbook.model.artifacts import ModelArtifacts
from stackbook.model.geometry import geometry_for

GPU_KINDS = tuple(gpu_kinds())
# Every engine's dtype names, back to the protocol's ("auto" is the weights' dtype).
PROTOCOL_NAME = {"bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "float32": "fp32", "fp8": "fp8",
                 "fp8_e4m3": "fp8"}
GPU_ARMS = [(path.name, arm.name) for path in sorted((REPO_ROOT / "campaigns").glob("*.yaml"))
            for arm in load_campaign(path).arms if arm.engine.kind in GPU_KINDS]


def flag(cmd: list[str], name: str) -> str:
    return cmd[cmd.index(name) + 1]


def named(value: str, weights: str) -> str:
    return weights if value == "auto" else PROTOCOL_NAME[value]


@pytest.fixture
def artifacts(tmp_path) -> ModelArtifacts:
    hf = tmp_path / "Qwen3.8-27B"
    hf.mkdir()
    return ModelArtifacts("m", hf, None)


def test_every_gpu_kind_has_a_committed_campaign():
    kinds = {load_campaign(REPO_ROOT / "campaigns" / f).arm(a).engine.kind for f, a in GPU_ARMS}
    assert kinds == set(GPU_KINDS)


@pytest.mark.parametrize("campaign_file, arm_name", GPU_ARMS)
def test_the_launch_carries_the_sizing_assumptions(campaign_file, arm_name, artifacts, tmp_path):
    c = load_campaign(REPO_ROOT / "campaigns" / campaign_file)
    arm = c.arm(arm_name)
    p = c.protocol_for(arm)
    hw = sizing.accelerator(c.hardware.accelerator)
    basis = CapacityBasis(geometry_for(c.model.catalog), p, hw.memory_bytes, c.hardware.activations_gib * sizing.GiB,
                          None, c.hardware.pool_gib * sizing.GiB if c.hardware.pool_gib else None)
    predicted = arm.engine.predicted_capacity(basis)
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.write_text("")
    spec = arm.engine.model_copy(update={"python": str(python)})
    adapter = adapter_class(spec.kind)(spec, artifacts, p, "m", tmp_path / "engine.log")
    cmd = adapter.command()
    weights = p.precision.weights
    assumed = {"kv_cache": p.precision.kv_cache, "state": basis.state_precision, "context": p.context_length}
    if spec.kind == "vllm":
        launched = {"kv_cache": named(flag(cmd, "--kv-cache-dtype"), weights),
                    "state": named(flag(cmd, "--mamba-ssm-cache-dtype"), weights),
                    "context": int(flag(cmd, "--max-model-len"))}
        assert float(flag(cmd, "--gpu-memory-utilization")) == spec.gpu_memory_utilization
        assert int(flag(cmd, "--tensor-parallel-size")) == spec.tensor_parallel_size
    elif spec.kind == "sglang":
        launched = {"kv_cache": named(flag(cmd, "--kv-cache-dtype"), weights),
                    "state": named(flag(cmd, "--mamba-ssm-dtype"), weights),
                    "context": int(flag(cmd, "--context-length"))}
        assert float(flag(cmd, "--mamba-full-memory-ratio")) == predicted["mamba_full_memory_ratio"]
        if predicted["radix_cache"] == "disabled":
            assert "--disable-radix-cache" in cmd and "--mamba-scheduler-strategy" not in cmd
        else:
            assert flag(cmd, "--mamba-scheduler-strategy") == predicted["radix_cache"]
    else:
        options = adapter.llm_api_options()["kv_cache_config"]
        launched = {"kv_cache": named(options["dtype"], weights),
                    "state": named(options["mamba_ssm_cache_dtype"], weights),
                    "context": int(flag(cmd, "--max_seq_len"))}
        assert float(flag(cmd, "--kv_cache_free_gpu_memory_fraction")) == spec.kv_cache_free_gpu_memory_fraction
        assert options["free_gpu_memory_fraction"] == spec.kv_cache_free_gpu_memory_fraction
        assert Path(flag(cmd, "--config")) == tmp_path / f"trtllm-options-{adapter.port}.yaml"
    assert launched == assumed, f"{campaign_file} arm {arm_name}: launched {launched}, sized for {assumed}"


def test_the_trtllm_options_file_is_written_as_the_command_names_it(artifacts, tmp_path):
    """start() writes the file before launching; here the launch itself fails (no GPU engine), the file stays."""
    c = load_campaign(REPO_ROOT / "campaigns" / "gpu-engines.yaml")
    arm = c.arm("trtllm")
    fake = tmp_path / "env" / "bin"
    fake.mkdir(parents=True)
    (fake / "python").write_text("")
    (fake / "trtllm-serve").write_text("#!/bin/sh\nexit 7\n")
    (fake / "trtllm-serve").chmod(0o755)
    spec = arm.engine.model_copy(update={"python": str(fake / "python")})
    adapter = adapter_class("trtllm")(spec, artifacts, c.protocol_for(arm), "m", tmp_path / "arm" / "engine.log")
    adapter.start()
    assert adapter.proc.wait(10) == 7
    written = yaml.safe_load(Path(flag(adapter.command(), "--config")).read_text())
    assert written == adapter.llm_api_options()
    assert written["kv_cache_config"] == {"free_gpu_memory_fraction": 0.9, "dtype": "fp8", "enable_block_reuse": True,
                                          "mamba_ssm_cache_dtype": "float32"}
