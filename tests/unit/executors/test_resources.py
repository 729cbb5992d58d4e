"""An arm's `resources:`: validated with the campaign (a clear error naming the resource and the
fix), recorded in campaign.resolved.yaml, turned into Ray task options, and refused at once when
no live node holds them."""
import pytest
import yaml
from stackbook.config.errors import CampaignError
from stackbook.config.loading import load_campaign

CAMPAIGN = """
name: placed
model: {{source: embedded}}
arms:
  - name: a
    engine: {{kind: llama_cpp}}
    resources: {resources}
"""


def test_resources_are_kept_and_dumped(write_campaign):
    c = load_campaign(write_campaign(CAMPAIGN.format(resources='{GPU: 1, "accelerator_type:H100": 0.001, node_a: 1}')))
    assert c.arms[0].resources == {"GPU": 1.0, "accelerator_type:H100": 0.001, "node_a": 1.0}
    dumped = yaml.safe_load(yaml.safe_dump(c.model_dump(mode="json", by_alias=True)))
    assert dumped["arms"][0]["resources"] == {"GPU": 1.0, "accelerator_type:H100": 0.001, "node_a": 1.0}


@pytest.mark.parametrize("resources, words", [
    ("{GPU: 0}", ["arms[0].resources", "GPU", "not positive", "positive amount"]),
    ('{"accelerator_type:H100": -0.5}', ["accelerator_type:H100", "not positive"]),
    ("{CPU: 2.5}", ["CPU", "whole number", "give 2 or 3"]),
    ("{GPU: many}", ["arms[0].resources.GPU", "number"]),
])
def test_bad_resources_are_named_with_the_fix(resources, words, write_campaign):
    with pytest.raises(CampaignError) as err:
        load_campaign(write_campaign(CAMPAIGN.format(resources=resources)))
    for w in words:
        assert w in str(err.value), str(err.value)


def nodes(*resources, alive=True):
    return [{"NodeID": f"n{i}", "Alive": alive, "Resources": r} for i, r in enumerate(resources)]


def request(**amounts):
    from stackbook.executors.ray_cluster import ResourceRequest

    class Arm:
        resources = amounts
    return ResourceRequest.for_arm(Arm)


def test_request_defaults_to_one_cpu_and_maps_to_task_options():
    r = request(GPU=1, node_a=1, memory=2**30)
    assert r.amounts == {"CPU": 1.0, "GPU": 1.0, "node_a": 1.0, "memory": 2.0**30}
    assert r.task_options() == {"num_cpus": 1.0, "num_gpus": 1.0, "memory": 2**30, "resources": {"node_a": 1.0}}
    assert request(CPU=4).task_options() == {"num_cpus": 4.0, "resources": {}}


def test_unsatisfiable_names_the_resource():
    cluster = nodes({"CPU": 1, "node_a": 1}, {"CPU": 1, "node_b": 1})
    assert request(node_a=1).unsatisfiable(cluster) is None
    why = request(GPU=1).unsatisfiable(cluster)
    assert "'GPU'" in why and "node_a" in why and "ray start" in why
    assert "the most on one node is 1" in request(CPU=2).unsatisfiable(cluster)
    assert "no single node" in request(node_a=1, node_b=1).unsatisfiable(cluster)
    # a dead node's resources do not count
    assert "'node_c'" in request(node_c=1).unsatisfiable(cluster + nodes({"CPU": 1, "node_c": 1}, alive=False))
