"""00_decide's rules: every answer changes the shortlist or its reasons, the managed endpoint needs
low or spiky volume AND no ops, the fit plan's order (quantize, then cards, then a smaller model),
the sharded rows, Little's law by hand, and the seed's silicon figures with their sources."""
import math

import pytest
from stackbook import sizing
from stackbook.analysis import decide
from stackbook.model.geometry import geometry_for, model_catalog

QWEN = geometry_for("qwen3.8-27b")
ARTIFACTS = model_catalog()["qwen3.8-27b"]["artifacts"]


def stacks(**answers) -> dict[str, dict]:
    return {r["stack"]: r for r in decide.shortlist(decide.Answers(**answers))}


def test_one_user_gets_a_local_runner_many_users_a_batching_server():
    one, many = stacks(platform="nvidia", concurrent_users=1), stacks(platform="nvidia", concurrent_users=13)
    # the stacks that qualify, in the registry's order: a kind states no place among the others
    assert list(one) == ["llama.cpp", "vLLM"] and "no batch to fill" in one["llama.cpp"]["why"]
    assert list(many) == ["vLLM"] and many["vLLM"]["why"].endswith("for 13 concurrent users")
    assert list(stacks(platform="cpu", concurrent_users=1)) == ["llama.cpp"]
    assert list(stacks(platform="cpu", concurrent_users=4)) == ["llama.cpp", "vLLM (CPU build)"]
    apple_one, apple_many = stacks(platform="apple"), stacks(platform="apple", concurrent_users=50)
    assert "a local runner is the seed's answer" in apple_one["MLX"]["why"]
    assert "50 concurrent users: the seed pairs local runners with one user" in apple_many["MLX"]["why"]


def test_a_shared_prefix_calls_for_sglang_only_with_many_users_json_always():
    assert "SGLang" not in stacks(shared_prefix=True, concurrent_users=1)
    assert stacks(shared_prefix=True, concurrent_users=1)["vLLM"]["for your answers"] == (
        "shared prefix: prefix caching, on by default")
    assert stacks(shared_prefix=True, concurrent_users=2)["SGLang"]["why"].startswith(
        "long prefixes shared across 2 concurrent users")
    json_one = stacks(json_output=True, concurrent_users=1)
    assert json_one["SGLang"]["why"].startswith("output that must validate against a schema")
    assert json_one["llama.cpp"]["for your answers"] == "JSON output: per-request `json_schema` or `grammar` (GBNF)"
    assert stacks(platform="apple", json_output=True)["MLX"]["for your answers"] == (
        "JSON output: not established for MLX; the json_schema canary decides")


def test_gpus_context_images_and_thinking_each_add_what_they_ask_of_each_engine():
    base = stacks(concurrent_users=1)
    assert base["vLLM"]["for your answers"] == "-" and base["llama.cpp"]["for your answers"] == "-"
    four = stacks(concurrent_users=1, gpus=4)
    assert four["vLLM"]["for your answers"].startswith("4 GPUs: tensor and pipeline parallel")
    assert "by layers by default: not tensor parallel" in four["llama.cpp"]["for your answers"]
    long = stacks(concurrent_users=1, context_tokens=131072)
    assert long["vLLM"]["for your answers"].startswith("131,072-token context: `--max-model-len`")
    assert "`--fit` shrinks an unset context" in long["llama.cpp"]["for your answers"]
    assert stacks(context_tokens=decide.LONG_CONTEXT_TOKENS - 1)["vLLM"]["for your answers"] == "-"
    images = stacks(platform="apple", images=True)
    assert images["MLX"]["for your answers"] == (
        "images: not established for MLX; confirm it serves this model's vision inputs before the campaign")
    assert stacks(images=True)["vLLM"]["for your answers"].startswith("images: multimodal inputs")
    thinking = stacks(thinking=True, json_output=True, concurrent_users=5)
    assert thinking["SGLang"]["for your answers"].startswith("thinking mode: `--reasoning-parser`")
    assert thinking["vLLM"]["for your answers"].startswith("thinking mode: `--reasoning-parser` splits")


def test_every_answer_says_what_it_changes():
    base = {r["answer"]: r["what it changes"] for r in decide.what_each_answer_changes(decide.Answers())}
    other = decide.Answers(concurrent_users=40, gpus=4, context_tokens=131072, shared_prefix=True, json_output=True,
                           images=True, thinking=True, ops_engineers=2, volume="spiky")
    changed = {r["answer"]: r["what it changes"] for r in decide.what_each_answer_changes(other)}
    assert list(base) == ["concurrent users", "GPUs", "context tokens", "shared prefix", "JSON output", "images",
                          "thinking mode", "ops", "volume"]
    assert all(base[k] != changed[k] for k in base), [k for k in base if base[k] == changed[k]]
    assert changed["GPUs"].startswith("a model sharded across 4 cards")
    assert "262,144 configured, 42,624 realized" in changed["context tokens"]
    assert "every arm runs the same preset" in changed["thinking mode"]


def test_the_managed_endpoint_needs_low_or_spiky_volume_and_nobody_to_run_the_stack():
    assert "managed endpoint" in stacks(volume="spiky", ops_engineers=0.5)
    assert "managed endpoint" in stacks(volume="low")
    assert "managed endpoint" not in stacks(volume="spiky", ops_engineers=2)      # a team to run it
    assert "managed endpoint" not in stacks(volume="spiky", on_call=True)         # an ops rotation
    assert "managed endpoint" not in stacks(volume="steady", ops_engineers=0)     # steady volume fills cards
    assert "thinking multiplies output tokens" in stacks(volume="low", thinking=True)["managed endpoint"][
        "for your answers"]


def test_hardware_table_shards_across_cards_and_offers_a_mac_and_a_laptop():
    rows = decide.hardware_table(QWEN, 8192, ("bf16", "q4_k_m"), ARTIFACTS)
    live = {(r["accelerator"], r["cards"], r["weights"]): r["live sequences"] for r in rows}
    # one 80 GB card: the seed's 36 (74.51 GiB - 50.10 GiB weights - 1 GiB = 23.41 GiB over 0.6434 GiB)
    assert live[("NVIDIA A100 80GB SXM", 1, "bf16")] == 36
    # two cards: 25.05 GiB of weights and 2 of the 4 KV heads per card: 48.46 GiB / (0.25 + 0.0717) GiB
    assert live[("NVIDIA A100 80GB SXM", 2, "bf16")] == 150
    # four cards: 8.83 GiB pool / (0.125 GiB KV, one head each + 0.0358 GiB state); eight: the one KV head is
    # replicated, so only the weights and the state shrink: 15.09 GiB / (0.125 + 0.0179) GiB
    assert [live[("NVIDIA RTX 4090", n, "bf16")] for n in (1, 2, 4, 8)] == [0, 0, 54, 105]
    assert {n for (name, n, _) in live if name == "NVIDIA A100 80GB SXM"} == {1, 2, 4, 8}
    assert {n for (name, n, _) in live if name.startswith(("Apple Mac", "Laptop"))} == {1}
    assert live[("Apple Mac, 32 GB unified memory", 1, "q4_k_m")] == 20
    assert live[("Apple Mac, 32 GB unified memory", 1, "bf16")] == 0
    assert not any(name.startswith("Cerebras") for (name, _, _) in live)   # an example, not an option


def test_fit_plan_quantizes_on_the_cards_you_have_before_adding_cards_or_shrinking_the_model():
    a100 = decide.fit_plan(QWEN, "a100-80gb", 1, 8192, ["q4_k_m", "bf16", "fp8"], ARTIFACTS)
    assert (a100.chosen.precision, a100.chosen.live_sequences) == ("bf16", 36)
    assert a100.verdict.endswith("no need to quantize.")
    rtx = decide.fit_plan(QWEN, "rtx-4090", 1, 8192, ["q4_k_m", "bf16", "fp8"], ARTIFACTS)
    # widest first whatever the order given; q4_k_m: 22.35 - 15.93 - 1 = 5.42 GiB / 0.6434 GiB = 8
    assert [(s.step, s.cards, s.precision, s.live_sequences) for s in rtx.tried] == [
        ("the hardware you have", 1, "bf16", 0), ("the hardware you have", 1, "fp8", 0),
        ("the hardware you have", 1, "q4_k_m", 8)]
    assert rtx.verdict.startswith("Quantize: q4_k_m is the widest precision") and "bf16 and fp8 do not" in rtx.verdict
    no_quant = decide.fit_plan(QWEN, "rtx-4090", 1, 8192, ["bf16", "fp8"], ARTIFACTS)
    assert [(s.cards, s.precision) for s in no_quant.tried] == [(1, "bf16"), (1, "fp8"), (2, "bf16"), (2, "fp8")]
    assert (no_quant.chosen.cards, no_quant.chosen.precision, no_quant.chosen.live_sequences) == (2, "fp8", 27)
    assert no_quant.verdict.endswith("add cards before choosing a smaller model.")
    mac = decide.fit_plan(QWEN, "mac-32gb", 1, 8192, ["bf16"], ARTIFACTS)
    assert mac.chosen is None and mac.verdict.endswith("choose a smaller model.")
    busy = decide.fit_plan(QWEN, "a100-80gb", 1, 8192, ["bf16"], ARTIFACTS, needed_sequences=40)
    assert (busy.chosen.cards, busy.chosen.live_sequences) == (2, 150)
    with pytest.raises(ValueError, match="mac-32gb shards across at most 1 card"):
        decide.fit_plan(QWEN, "mac-32gb", 2, 8192, ["q4_k_m"], ARTIFACTS)
    rows = decide.fit_plan_rows(busy)
    assert [(r["cards"], r["enough"], r["chosen"]) for r in rows] == [(1, False, False), (2, True, True)]


def test_littles_law_by_hand():
    d = decide.peak_demand(200, session_minutes=10, requests_per_session=10, think_time_s=50,
                           working_hours=8, peak_to_average=3)
    assert d.sessions_per_s == pytest.approx(200 / 28800)
    assert d.concurrent_sessions == pytest.approx(200 / 28800 * 600)            # 4.17 sessions open
    assert d.seconds_per_request == pytest.approx(600 / 10 - 50)                # 10 s per reply
    assert d.mean_in_flight == pytest.approx(200 / 28800 * 10 * 10)             # 0.694
    assert d.peak_in_flight == pytest.approx(200 / 28800 * 10 * 10 * 3)         # 2.08
    assert d.peak_sessions == 13                                                # ceil(4.17 x 3)
    assert decide.demand_table(d)[4] == {"quantity": "requests in flight (mean)", "value": 0.69,
                                         "how": "Little's law: requests per second x seconds per reply"}
    ok = decide.demand_sentence(d, 36, 8192)
    assert "**4.2 sessions**" in ok and "**0.69 requests**" in ok and "**2.08** at a peak 3 times" in ok
    assert ok.endswith("**36 live sequences** of 8,192 tokens, 12 times the peak: the cache is not what limits "
                       "this team.")
    assert "short of the peak of 3" in decide.demand_sentence(d, 2, 8192)
    assert decide.peak_demand(400, 10, 10, 50, sessions_per_user=2).mean_in_flight == pytest.approx(
        4 * d.mean_in_flight)
    with pytest.raises(ValueError, match="longer than a 10-minute session"):
        decide.peak_demand(200, 10, 10, 60)


def test_catalog_carries_the_seeds_silicon_figures_with_sources():
    cat = sizing.accelerator_catalog()
    assert cat["b200"].bandwidth == 8e12 and "up to 8 TB/s" in cat["b200"].source
    wse = cat["cerebras-wse-3"]
    assert (wse.memory_bytes, wse.bandwidth, wse.sizing_target) == (44e9, 21e15, False)
    assert "44 GB of SRAM" in wse.source and "21 petabytes per second" in wse.source
    assert (cat["mac-32gb"].memory_bytes, cat["mac-32gb"].platform, cat["mac-32gb"].max_cards) == (32e9, "apple", 1)
    assert cat["laptop-32gb"].bandwidth is None and "well-specified laptop" in cat["laptop-32gb"].source
    assert all(hw.source for hw in cat.values())
    rows = {r["device"]: r for r in decide.silicon_table(140e9)}   # the seed's 70 B model at 16 bits
    assert rows["Cerebras WSE-3 (on-wafer SRAM)"]["devices to hold the weights"] == 4   # "at least four wafers"
    assert rows["NVIDIA B200"]["devices to hold the weights"] == 1
    assert rows["NVIDIA B200"]["ms to read all memory"] == 22.5                          # 180 GB / 8 TB/s
    tpu = rows["Google TPU 8i"]
    assert tpu["memory GB"] is None and "no figures given" in tpu["source"]


def test_the_worked_example_shortlists_the_managed_endpoint_its_arithmetic_favours():
    """The notebook's defaults (the seed's worked example): 200 daily users put 0.69 requests in
    flight on average against 36 live bf16 sequences on one A100 80 GB, and 3,000,000 tokens a day
    cost 1.80 metered against 240.00 owned (one card at 2.50 an hour, 2 ops hours at 90). The
    shortlist follows that arithmetic, as the seed does: owning would buy idle silicon."""
    demand = decide.peak_demand(200, 10.0, 10, 50.0, working_hours=8.0, peak_to_average=3.0)
    plan = decide.fit_plan(QWEN, "a100-80gb", 1, 8192, ["bf16", "fp8", "q4_k_m"], ARTIFACTS,
                           needed_sequences=math.ceil(demand.peak_in_flight))
    tokens = 200 * 1.0 * 10 * 1500
    cost = decide.managed_vs_owned(tokens, 0.60, 2.50, cards=plan.chosen.cards, ops_hours_per_day=2.0,
                                   engineer_hour_price=90.0)
    assert (round(cost["managed_per_day"], 2), round(cost["owned_per_day"], 2)) == (1.80, 240.00)
    arithmetic = decide.Arithmetic(tokens, cost["managed_per_day"], cost["owned_per_day"], demand.mean_in_flight,
                                   plan.chosen.live_sequences)
    assert round(demand.mean_in_flight, 2) == 0.69 and plan.chosen.live_sequences == 36
    assert arithmetic.buys_idle_silicon
    answers = decide.Answers(platform="nvidia", concurrent_users=demand.peak_sessions, shared_prefix=True,
                             json_output=True, ops_engineers=0.5, volume="steady")
    stacks = decide.shortlist(answers, arithmetic)
    assert stacks[0]["stack"] == "managed endpoint"
    assert stacks[0]["why"] == ("At 3,000,000 tokens a day the endpoint costs 1.80 against 240.00 owned (133 times "
                                "less), and owned capacity would stand 98% idle (0.69 requests in flight on average "
                                "against 36 live sequences): owning a card would be buying idle silicon")
    volume = {r["answer"]: r["what it changes"] for r in decide.what_each_answer_changes(answers, arithmetic)}["volume"]
    assert volume == "steady, but owned capacity would stand 98% idle at this volume"
    assert "managed endpoint" not in {s["stack"] for s in decide.shortlist(answers)}  # the rule alone: steady


def test_busy_owned_capacity_keeps_the_managed_endpoint_off_the_list():
    """The same cost, but the owned cards would be busy (30 of 36 sequences in flight): no idle silicon."""
    busy = decide.Arithmetic(3e6, 1.80, 240.0, 30.0, 36)
    assert busy.managed_cheaper and not busy.buys_idle_silicon
    answers = decide.Answers(platform="nvidia", concurrent_users=40, ops_engineers=0.5, volume="steady")
    assert "managed endpoint" not in {s["stack"] for s in decide.shortlist(answers, busy)}
    dearer = decide.Arithmetic(3e9, 1800.0, 240.0, 0.69, 36)  # idle, but the endpoint costs more
    assert not dearer.buys_idle_silicon
