"""Arrival patterns: load levels, cool-down, prompts and requests per level (turns counted once),
and the seeded schedules each pattern makes."""
import json

import pytest
from stackbook.config.protocol import Protocol
from stackbook.loadgen import arrivals
from stackbook.measure import point_meter, sweep


def protocol(arrival, turns=None, **kw):
    workload = {"kind": "synthetic", "prompt_tokens": 32, "output_tokens": 8}
    if turns:
        workload["conversation"] = {"turns": turns}
    return Protocol(arrival=arrival, workload=workload, warmup_requests=3, requests_per_point=10, **kw)


def test_closed_loop_levels_cooldown_and_counts():
    p = protocol({"kind": "closed_loop", "concurrency": [1, 4]}, repetitions=2, seeds=[0, 1])
    levels = p.arrival.load_levels()
    assert levels == [{"level": "c1", "concurrency": 1}, {"level": "c4", "concurrency": 4}]
    assert [p.arrival.cooldown_requests(lv, p) for lv in levels] == [0, 3]
    assert [p.arrival.prompts_at(lv, p) for lv in levels] == [13, 16]
    assert p.requests_per_arm() == 2 * (13 + 16)
    assert p.arrival.schedule(levels[0], 5, seed=0) is None
    assert sweep.point_name(levels[1], 1) == "c4-r1"


def test_conversation_turns_multiply_requests_not_prompts():
    p = protocol({"kind": "poisson", "rates": [0.5, 2]}, turns=3)
    levels = p.arrival.load_levels()
    assert levels == [{"level": "rate0.5", "rate": 0.5}, {"level": "rate2", "rate": 2.0}]
    assert p.arrival.prompts_at(levels[0], p) == 3 + 10 + 3  # warm-up, measured, cool-down = warm-up
    assert p.requests_at(levels[0]) == 16 * 3
    assert p.requests_per_repetition() == 2 * 16 * 3
    assert p.requests_per_arm() == 2 * 2 * 16 * 3  # two repetitions by default


@pytest.mark.parametrize("arrival, expected", [
    ({"kind": "constant", "rates": [4]}, lambda n, seed: arrivals.constant_schedule(4, n)),
    ({"kind": "poisson", "rates": [4]}, lambda n, seed: arrivals.poisson_schedule(4, n, seed)),
    ({"kind": "gamma", "rates": [4], "burstiness": 3}, lambda n, seed: arrivals.gamma_schedule(4, n, 3, seed)),
])
def test_open_loop_schedules_are_the_seeded_ones(arrival, expected):
    p = protocol(arrival)
    level = p.arrival.load_levels()[0]
    assert p.arrival.schedule(level, 20, seed=7) == expected(20, 7)
    assert sweep.schedule_for(p, level, 20, 7) == expected(20, 7)


def test_poisson_schedule_values_are_unchanged():
    p = protocol({"kind": "poisson", "rates": [2]})
    s = p.arrival.schedule(p.arrival.load_levels()[0], 4, seed=0)
    assert s == pytest.approx([0.0, 0.9303035555326117, 1.6396181320184926, 1.912474704789289])


def test_trace_replay_sends_every_row_on_its_timestamp(tmp_path):
    rows = [{"timestamp_s": 100 + t, "prompt_tokens": 20, "output_tokens": 5} for t in (0, 1, 3)]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    p = protocol({"kind": "trace", "path": str(path), "speedup": 2}, repetitions=2, seeds=[0, 1])
    [level] = p.arrival.load_levels()
    assert level == {"level": "trace", "trace": str(path), "speedup": 2.0}
    assert p.arrival.prompts_at(level, p) == 3 and p.arrival.cooldown_requests(level, p) == 0
    assert p.arrival.schedule(level, 3, seed=0) == [0.0, 0.5, 1.5]
    assert p.requests_per_arm() == 6
    assert p.arrival.longest_request_tokens() == 25


def test_a_block_hashed_trace_replays_its_timestamps_lengths_and_blocks():
    from stackbook.locations import REPO_ROOT

    path = str(REPO_ROOT / "campaigns/traces/example-mooncake.jsonl")
    p = protocol({"kind": "trace", "path": path, "format": "mooncake"}, context_length=4096)
    [level] = p.arrival.load_levels()
    assert p.arrival.prompts_at(level, p) == 12
    assert p.arrival.schedule(level, 2, seed=0) == [0.0, 1.158]
    block_tokens, ids = p.arrival.prompt_blocks(level)
    assert block_tokens == 512 and ids[:2] == [(0, 1), (0, 2, 3)]
    plain = protocol({"kind": "trace", "path": str(REPO_ROOT / "campaigns/traces/example-azure.csv"),
                      "format": "azure"})
    assert plain.arrival.prompt_blocks(plain.arrival.load_levels()[0]) is None


def test_an_unknown_trace_format_is_refused_naming_the_known_ones():
    from pydantic import ValidationError
    from stackbook.locations import REPO_ROOT

    with pytest.raises(
        ValidationError, match="'stackbook', 'azure', 'burstgpt', 'mooncake', 'openai', 'sharegpt' or 'weka'"
    ):
        protocol({"kind": "trace", "path": str(REPO_ROOT / "campaigns/traces/example-azure.csv"), "format": "csv"})


def test_the_sweep_counts_through_the_protocol():
    p = protocol({"kind": "closed_loop", "concurrency": [2]}, turns=2)
    [level] = sweep.load_levels(p)
    assert sweep.requests_at(p, level) == 14 and sweep.turns_of(p) == 2
    assert point_meter.cooldown_requests(p, level) == 1 and sweep.point_name(level, 0) == "c2-r0"
    assert p.requests_per_repetition() == sweep.requests_at(p, level) * sweep.turns_of(p)


def test_runs_recorded_before_the_split_still_load():
    """Every resolved campaign records burstiness 1 for any open loop; it loads, and means Poisson."""
    p = protocol({"kind": "poisson", "rates": [1.0], "burstiness": 1.0})
    assert list(p.arrival.model_dump().items()) == [("kind", "poisson"), ("rates", [1.0]), ("burstiness", 1.0)]
    assert Protocol.model_validate(p.model_dump()) == p
