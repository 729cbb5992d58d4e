"""The measured map by the seed's layers, on the committed quickstart run (AVX-512 EPYC): each
centre in exactly one layer, the engine's own prefill and decode clock beside the kernels, the
memory wall as a ratio, and each layer a kind cannot split out said so."""
import pytest

from stackbook.analysis import comparison, demand_map

RUN = "outputs/quickstart/reference"


@pytest.fixture(scope="module")
def layers():
    maps = demand_map.measured_demand_maps(RUN)
    _, arms = comparison.load_run(RUN)
    return maps, demand_map.layers_by_arm(maps, comparison.roofline_efficiency(arms, comparison.comparison_frame(arms)))


def test_every_centre_lands_in_one_layer_and_the_demands_add_up(layers):
    maps, table = layers
    for arm, d in maps.items():
        rows = table.loc[arm]
        assert list(rows.index) == list(demand_map.STACK_LAYERS)
        assert rows["D (ms/request)"].sum() == pytest.approx(sum(c.demand_ms for c in d.centres), abs=0.01)
        named = [c for cell in rows["centres"] if cell != "-" for c in cell.split(", ")]
        assert sorted(named) == sorted(c.centre for c in d.centres)
        assert rows.loc["kernels", "bottleneck"] and rows.loc["kernels", "centres"] == "engine compute"


def test_vllm_shows_host_runtime_and_kernels_measured_apart(layers):
    _, table = layers
    v = table.loc["vllm-cpu"]
    assert (v.loc["host execution", "centres"], v.loc["runtime", "centres"]) == ("client, engine front end",
                                                                                 "engine scheduler")
    assert v.loc["runtime", "D (ms/request)"] == pytest.approx(44.75)
    assert v.loc["kernels", "note"].startswith("prefill 422 ms and decode 798 ms a request by the engine's own clock")
    assert v.loc["silicon", "note"].startswith("single-stream decode at 24% of the memory-bandwidth bound (28.3 of")


def test_llama_cpp_says_which_layers_its_one_process_holds(layers):
    _, table = layers
    ll = table.loc["llama-cpp"]
    assert ll.loc["runtime", "note"].startswith("not split out: the engine schedules inside its compute process")
    assert ll.loc["host execution", "note"].startswith("client side only")
    assert ll.loc["orchestration", "note"] == "none here: one engine process, no router in front of it"
    assert ll.loc["kernels", "note"].startswith("prefill 787 ms and decode 965 ms a request")


def test_the_method_path_quotes_the_reference_layers(layers):
    import re
    from pathlib import Path

    _, table = layers
    doc = re.sub(r"\s+", " ", Path("docs/method-path.md").read_text())
    runtime = table.loc[("vllm-cpu", "runtime"), "D (ms/request)"]
    share = {arm: re.search(r"at (\d+)% of", table.loc[(arm, "silicon"), "note"]).group(1)
             for arm in ("vllm-cpu", "llama-cpp")}
    assert f"vLLM's scheduler ({runtime:g} ms a request at concurrency 4 in the reference)" in doc
    assert f"({share['vllm-cpu']}% for vLLM-CPU, {share['llama-cpp']}% for llama.cpp there)" in doc
