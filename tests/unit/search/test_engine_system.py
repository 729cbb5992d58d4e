"""A live engine as a searched system, without starting one: the campaign's arm found and checked,
each configuration turned into the arm's engine settings or launch flags, and the step model
fitted on two calibration points and read at other slots and threads."""
import pytest

from stackbook.config.errors import CampaignError
from stackbook.search import engine_model as m
from stackbook.search.campaign import load_search_campaign

SEARCH = """
name: probe
system: {kind: engine, campaign: campaigns/quickstart.yaml, arm: ARM, concurrency: 4, requests: 32}
search: {budget: {steps: 1}, knobs: KNOBS}
"""


def campaign(tmp_path, arm="llama-cpp", knobs="[engine.threads, engine.parallel, --flash-attn, arm label]"):
    path = tmp_path / "search.yaml"
    path.write_text(SEARCH.replace("ARM", arm).replace("KNOBS", knobs))
    return load_search_campaign(path)


def test_a_configuration_sets_engine_fields_and_launch_flags_and_leaves_defaults_alone(tmp_path):
    c = campaign(tmp_path)
    base = c.system.configured(c.incumbent())
    assert (base.engine.threads, base.engine.parallel, base.engine.extra_args) == (1, 4, [])
    changed = c.system.configured({**c.incumbent(), "engine.threads": 2, "--flash-attn": "on", "arm label": "b"})
    assert (changed.engine.threads, changed.engine.parallel) == (2, 4)
    assert changed.engine.extra_args == ["--flash-attn", "on"]
    assert changed.name == "llama-cpp"


def test_the_load_is_the_campaigns_reply_length_and_slo_at_the_searched_clients(tmp_path):
    load = campaign(tmp_path).system.load()
    assert (load.concurrency, load.output_tokens, load.ttft_ms, load.tpot_ms, load.requests) == (4, 16, 1500, 100, 32)


def test_an_unknown_arm_a_kind_without_a_step_model_and_a_protocol_knob_are_refused(tmp_path):
    with pytest.raises(CampaignError, match="system.arm: no arm 'nope' in campaigns/quickstart.yaml"):
        campaign(tmp_path, arm="nope")
    with pytest.raises(CampaignError, match="runs vllm_cpu, which declares no slots and threads knobs"):
        campaign(tmp_path, arm="vllm-cpu")
    with pytest.raises(CampaignError, match="no knob 'protocol.precision.kv_cache' on kind engine"):
        campaign(tmp_path, knobs="[protocol.precision.kv_cache]")


def test_the_step_line_goes_through_both_calibration_points():
    one, four = m.Timing(batch=1, ttft_s=0.9, tpot_s=0.040), m.Timing(batch=4, ttft_s=1.6, tpot_s=0.070)
    costs = m.fit(one, four, threads=1, cores=2)
    assert costs.t1_ms == pytest.approx(10.0) and costs.t0_ms == pytest.approx(30.0)
    assert costs.knee(4, 1).step_s(4) == pytest.approx(0.070) and costs.knee(4, 1).step_s(1) == pytest.approx(0.040)
    assert costs.prefill_steps == 23  # (0.9 s - one step) / 40 ms, plus the step that yields the first token
    assert costs.knee(4, 2).step_s(4) == pytest.approx(0.035)  # two threads on two cores: half the step
    assert costs.knee(4, 8).step_s(4) == pytest.approx(0.035)  # more threads than cores: no faster
    flat = m.fit(one, m.Timing(batch=4, ttft_s=1.0, tpot_s=0.030), threads=1, cores=2)
    assert flat.t1_ms == 0 and flat.t0_ms == pytest.approx(40.0)  # a TPOT that fell with the batch: noise


def test_the_model_ranks_more_cores_ahead_and_never_more_threads_than_cores(tmp_path):
    c = campaign(tmp_path)
    load = c.system.load().model_copy(update={"ttft_ms": 5000})
    costs = m.fit(m.Timing(batch=1, ttft_s=0.5, tpot_s=0.040), m.Timing(batch=4, ttft_s=0.8, tpot_s=0.070), 1, 2)

    def goodput(threads, slots):
        return m.predict({"engine.threads": threads, "engine.parallel": slots}, costs, load,
                         "engine.parallel", "engine.threads")

    assert goodput(2, 4) == pytest.approx(2 * goodput(1, 4))
    assert goodput(4, 4) == goodput(2, 4)
    assert goodput(1, 8) == goodput(1, 4)  # four clients fill four slots: more slots change nothing
    assert goodput(1, 2) < goodput(1, 4)


def test_the_incumbent_is_the_arm_as_the_campaign_sets_it_and_a_searched_flag_replaces_the_arms(tmp_path):
    c = campaign(tmp_path).system
    arm = c.base_arm.model_copy(update={"engine": c.base_arm.engine.model_copy(
        update={"parallel": 8, "extra_args": ["--flash-attn", "off", "--no-warmup"]})})
    object.__setattr__(c, "__dict__", {**c.__dict__, "base_arm": arm})  # the arm a campaign could set
    knobs = {k.name: k for k in c.declared()}
    assert (knobs["engine.parallel"].default, knobs["--flash-attn"].default, knobs["engine.threads"].default) == (
        8, "off", 1)
    assert c.configured({k: v.default for k, v in knobs.items()}).engine.extra_args == [
        "--flash-attn", "off", "--no-warmup"]
    on = c.configured({**{k: v.default for k, v in knobs.items()}, "--flash-attn": "on"})
    assert on.engine.extra_args == ["--no-warmup", "--flash-attn", "on"]


def test_the_carried_load_needs_the_campaigns_capacity_search(tmp_path):
    path = tmp_path / "search.yaml"
    path.write_text(SEARCH.replace("concurrency: 4", "concurrency: carried").replace("ARM", "llama-cpp")
                    .replace("KNOBS", "[engine.parallel]"))
    with pytest.raises(CampaignError, match="campaigns/quickstart.yaml has no protocol.capacity section"):
        load_search_campaign(path)
    path.write_text(path.read_text().replace("quickstart.yaml", "capacity.yaml"))
    c = load_search_campaign(path)
    assert c.system.concurrency == "carried" and c.system.at(3).load().concurrency == 3
    assert c.incumbent()["engine.parallel"] == 8  # capacity.yaml's llama-cpp arm has eight slots


def test_a_configurations_capacity_is_worded_with_its_cost_or_why_it_has_none():
    from stackbook.search.carried_load import capacity_words, carried_words

    found = {"concurrency": 4, "upper": 8.0, "stop_reason": "resolved", "attainment": 0.9, "probes": [{}] * 3,
             "output_tok_s": 42.5, "hardware_hour_usd": 0.085, "cost_per_m_output_tokens_usd": 0.5556}
    assert capacity_words(found) == ("capacity inside the SLO: 4 clients (8 proven outside), 42.5 output tok/s "
                                     "there; $0.56 per million output tokens at $0.085 an hour, streaming at that "
                                     "load all hour")
    assert carried_words(found).startswith("Measured at 4 clients in a closed loop: the highest load the incumbent was "
                                           "proven to carry inside the SLO (90% of requests) by the campaign's "
                                           "capacity search (8 proven outside; 3 probes; resolved).")
    none = found | {"concurrency": None, "stop_reason": "nothing proven inside down to the smallest load allowed, 1"}
    assert capacity_words(none) == ("capacity inside the SLO: none proven (nothing proven inside down to the "
                                    "smallest load allowed, 1)")
