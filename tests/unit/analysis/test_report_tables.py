"""Tables and lines the analysis, decide and demand-map notebooks display, on hand-made inputs."""
from types import SimpleNamespace

from stackbook.analysis import comparison as analysis
from stackbook.analysis import decide, demand_map
from stackbook.evidence.rundir import RunDir


def arm(kind: str, remote: bool = False):
    return SimpleNamespace(engine=SimpleNamespace(kind=kind), remote=remote)


def test_gate_table_reads_verdicts_and_capacities(tmp_path):
    arms = {
        "llama": {"arm": arm("llama_cpp"), "dir": tmp_path, "engine": {"ready_after_s": 3.14159},
                  "results": {"canaries": {"verdict": "PASS", "passed": 7, "gating_checks": 7,
                                           "out_of_scope": {"tool-call": "no tools", "json": "free text"}},
                              "sizing": {"predicted_capacity": {"kv_tokens": 2048},
                                         "realized_capacity": {"kv_tokens": 2048, "max_concurrency": 2}}}},
        "vllm": {"arm": arm("vllm_cpu"), "dir": tmp_path, "engine": {}, "results": {}},
    }
    t = analysis.gate_table(arms)
    assert t.loc["llama"].to_dict() == {
        "canaries": "PASS", "gating passed": "7/7", "out of scope": "tool-call, json",
        "KV tokens predicted": 2048, "KV tokens realized": 2048, "max concurrency (engine)": 2,
        "engine ready after (s)": 3.1}
    assert t.loc["vllm", "canaries"] == "not run" and t.loc["vllm", "gating passed"] == "0/0"
    assert t.loc["vllm", "out of scope"] == "-"


def test_campaign_summary_names_arms_remote_endpoints_and_evidence(tmp_path):
    campaign = SimpleNamespace(name="q", description="two engines")
    run = RunDir(tmp_path)
    arms = {"a": {"arm": arm("llama_cpp"), "dir": run.arm("a"), "engine": {}},
            "b": {"arm": arm("openai"), "dir": run.arm("b"), "engine": {"remote": True}}}
    for made in ("arms/b/10_sizing.ipynb", "arms/a/passport.md"):
        (tmp_path / made).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / made).write_text("")
    text = analysis.campaign_summary(campaign, arms)
    assert "arms/b/30_load_sweep.ipynb" not in text  # a stage that did not run is not linked
    assert text.startswith("**Campaign** `q`: two engines  \n**Arms:** `a` (llama_cpp), `b` (openai)")
    assert "**Remote endpoints:** b: their latencies include the network path." in text
    assert "`b`: [sizing](arms/b/10_sizing.ipynb)" in text and "[passport](arms/a/passport.md)" in text
    assert "Remote" not in analysis.campaign_summary(campaign, {"a": arms["a"]})


def test_passports_read_each_arm_or_say_it_did_not_run(tmp_path):
    run = RunDir(tmp_path)
    run.arm("a").create().passport_md.write_text("# a passport")
    arms = {"a": {"dir": run.arm("a")}, "b": {"dir": run.arm("b")}}
    assert analysis.passports(arms) == ["# a passport", "*b: no passport (the arm did not run)*"]


def test_cost_by_volume_shows_where_owning_becomes_cheaper():
    rows = decide.cost_by_volume([1e6, 1e8], 1.0, 2.0, ops_hours_per_day=1.0, engineer_hour_price=12.0)
    # owned: 2.0 x 24 h + 1 h x 12 = 60 per day; managed: 1 and 100 per day
    assert rows == [
        {"tokens per day": "1,000,000", "managed per day": 1.0, "owned per day": 60.0, "cheaper": "managed endpoint"},
        {"tokens per day": "100,000,000", "managed per day": 100.0, "owned per day": 60.0, "cheaper": "owned cards"}]


def test_cost_summary_states_the_break_even():
    cost = decide.managed_vs_owned(1e6, 1.0, 2.0)
    assert decide.cost_summary(cost, 1e6) == (
        "Managed: **1.00 per day** for 1,000,000 tokens. Owned: **48.00 per day** (card and operations). "
        "Break-even at **48,000,000 tokens per day**; at this volume the cheaper option is the **managed endpoint**.")


def test_describe_model_counts_layers_by_kind():
    g = SimpleNamespace(name="m", num_parameters=27.4e9, num_layers=64, kv_layers=16, linear_layers=48,
                        max_context=262144)
    assert decide.describe_model(g) == ("**m**: 27.4 B parameters, 64 layers (16 keep a KV cache, 48 linear-attention "
                                        "with a fixed state), trained context 262,144 tokens.")


def test_improvement_summary_moves_the_seed_bottleneck():
    before = demand_map.demand_map(demand_map.SEED_LAYERS)
    after = demand_map.demand_map(demand_map.improve(demand_map.SEED_LAYERS, "runtime", 0.1))
    assert demand_map.improvement_summary(before, after, "runtime", 0.1) == (
        "Making **runtime** 10% faster: bottleneck **runtime** -> **kernels**; bound 76.9 -> 83.3 requests/s.")
