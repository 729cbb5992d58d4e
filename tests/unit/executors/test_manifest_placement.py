"""The manifest records where each arm ran (executor, node id, host, resources granted, span),
and an arm whose node was lost ends `node_lost`."""
import pytest
from pydantic import ValidationError
from stackbook.config.loading import load_campaign
from stackbook.evidence.manifest import Manifest, ManifestFile, read_manifest
from stackbook.evidence.rundir import RunDir


def test_placement_is_recorded_and_validated(tmp_path):
    campaign = load_campaign("campaigns/seed-qwen3.8-27b.yaml")
    run = RunDir(tmp_path / "run").create()
    m = ManifestFile(run, campaign, "campaigns/seed-qwen3.8-27b.yaml")
    m.data["executor"] = "ray"
    m.arm("vllm").update(status="complete", seconds=3.2, placement={
        "executor": "ray", "node_id": "ab12", "host": "gpu-node-1", "node_ip": "10.0.0.7",
        "resources": {"CPU": 1.0, "node_a": 1.0}, "started_unix": 10.0, "finished_unix": 13.2})
    m.arm("sglang-default").update(status="node_lost", error="node cd34 (gpu-node-2) was lost during 10_sizing",
                                   placement={"executor": "ray", "node_id": "cd34", "host": "gpu-node-2"})
    m.save()
    back = read_manifest(run)
    assert back.executor == "ray"
    placed = back.arms["vllm"].placement
    assert (placed.node_id, placed.host, placed.resources) == ("ab12", "gpu-node-1", {"CPU": 1.0, "node_a": 1.0})
    assert placed.finished_unix - placed.started_unix == pytest.approx(3.2)
    assert back.arms["sglang-default"].status == "node_lost"


def test_placement_needs_a_known_executor():
    with pytest.raises(ValidationError):
        Manifest.model_validate({"campaign": "c", "campaign_file": "c.yaml", "status": "running", "created_unix": 0,
                                 "arms": {"a": {"status": "running", "placement": {"executor": "slurm"}}}})
