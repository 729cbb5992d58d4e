"""Length distributions and workload shapes: statistics of each distribution, the prompts they
become, and campaign errors that name the field and the fix."""
import json
import math
import statistics

import numpy as np
import pytest
import yaml
from stackbook.config.errors import CampaignError
from stackbook.config.loading import load_campaign
from stackbook.config.protocol import SyntheticWorkload
from stackbook.loadgen.lengths import read_empirical
from stackbook.loadgen.workload import (
    ANSWER_SCHEMA,
    ApproximateTokenizer,
    count_tokens,
    synthetic_prompts,
)

TOK = ApproximateTokenizer()


def dist(**kw):
    return SyntheticWorkload(prompt_tokens=kw).prompt_tokens


def dist_of(value):
    return SyntheticWorkload(prompt_tokens=value).prompt_tokens


def test_fixed_and_int_give_one_value():
    assert dist_of(100).sample(5, seed=0) == [100] * 5
    assert dist(kind="fixed", tokens=7).sample(3, seed=0) == [7, 7, 7]


def test_uniform_covers_its_range_evenly():
    v = dist(kind="uniform", min=10, max=19).sample(20_000, seed=1)
    assert min(v) == 10 and max(v) == 19
    assert statistics.mean(v) == pytest.approx(14.5, abs=0.1)
    counts = np.bincount(v)[10:20]
    assert counts.min() > 0.9 * 2000 and counts.max() < 1.1 * 2000


def test_normal_mean_sd_and_clipping():
    v = dist(kind="normal", mean=200, std=20, min=1, max=1000).sample(20_000, seed=2)
    assert statistics.mean(v) == pytest.approx(200, rel=0.01)
    assert statistics.stdev(v) == pytest.approx(20, rel=0.03)
    clipped = dist(kind="normal", mean=200, std=100, min=150, max=250).sample(5000, seed=2)
    assert min(clipped) == 150 and max(clipped) == 250


def test_lognormal_median_and_tail():
    d = dist(kind="lognormal", median=100, sigma=0.8, min=1, max=100_000)
    v = d.sample(40_000, seed=3)
    assert statistics.median(v) == pytest.approx(100, rel=0.03)
    # mean of a lognormal = median * exp(sigma^2 / 2)
    assert statistics.mean(v) == pytest.approx(100 * math.exp(0.32), rel=0.03)
    assert d.mean_tokens() == pytest.approx(100 * math.exp(0.32), rel=0.03)


def test_seeded_samples_repeat_and_differ():
    d = dist(kind="lognormal", median=50, sigma=0.5, min=1, max=500)
    assert d.sample(50, seed=4) == d.sample(50, seed=4)
    assert d.sample(50, seed=4) != d.sample(50, seed=5)


def test_empirical_from_csv_jsonl_and_text(tmp_path):
    (tmp_path / "l.csv").write_text("id,input\n1,30\n2,70\n3,70\n")
    (tmp_path / "l.jsonl").write_text("".join(json.dumps({"n": n}) + "\n" for n in (5, 9)))
    (tmp_path / "l.txt").write_text("12\n\n40\n")
    assert read_empirical(str(tmp_path / "l.csv"), "input") == [30, 70, 70]
    assert read_empirical(str(tmp_path / "l.jsonl"), "n") == [5, 9]
    assert read_empirical(str(tmp_path / "l.txt")) == [12, 40]
    d = dist(kind="empirical", path=str(tmp_path / "l.csv"), column="input")
    v = d.sample(30_000, seed=0)
    assert set(v) == {30, 70} and v.count(70) / len(v) == pytest.approx(2 / 3, abs=0.02)
    assert d.bounds() == (30, 70)


@pytest.mark.parametrize("body, words", [
    ("id,input\n1,30\n", ["column", "input"]),
    ("id,input\n1,abc\n", ["number of tokens"]),
])
def test_empirical_errors_name_the_file_and_fix(tmp_path, body, words):
    (tmp_path / "bad.csv").write_text(body)
    column = "input" if "abc" in body else "output"
    with pytest.raises(ValueError) as err:
        read_empirical(str(tmp_path / "bad.csv"), column)
    assert "bad.csv" in str(err.value) and all(w in str(err.value) for w in words)


BASE = {"name": "w", "model": {"source": "embedded"}, "arms": [{"name": "a", "engine": {"kind": "llama_cpp"}}]}


def campaign_error(tmp_path, protocol) -> str:
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump({**BASE, "protocol": protocol}))
    with pytest.raises(CampaignError) as err:
        load_campaign(p)
    return str(err.value)


def test_unbounded_distribution_needs_max(tmp_path):
    msg = campaign_error(tmp_path, {"workload": {"kind": "synthetic",
                                                 "output_tokens": {"kind": "lognormal", "median": 64, "sigma": 1}}})
    assert "  - protocol.workload.output_tokens.max: Field required. Fix: add it" in msg.splitlines()


def test_min_above_max_says_swap(tmp_path):
    msg = campaign_error(tmp_path, {"workload": {"kind": "synthetic",
                                                 "prompt_tokens": {"kind": "uniform", "min": 90, "max": 20}}})
    assert "swap" in msg


def test_conversation_must_fit_the_context(tmp_path):
    msg = campaign_error(tmp_path, {"context_length": 1024, "workload": {
        "kind": "synthetic", "prompt_tokens": 200, "output_tokens": 100, "conversation": {"turns": 4}}})
    assert "1200" in msg and "context_length" in msg and "last turn" in msg


def test_prefix_longer_than_prompt_is_refused(tmp_path):
    msg = campaign_error(tmp_path, {"workload": {"kind": "synthetic", "prompt_tokens": 64,
                                                 "shared_prefix": {"groups": 2, "tokens": 60}}})
    assert "shared_prefix.tokens" in msg and "raise prompt_tokens" in msg


def test_prompts_follow_the_drawn_lengths_and_share_group_prefixes():
    w = SyntheticWorkload(prompt_tokens={"kind": "uniform", "min": 60, "max": 120},
                          output_tokens={"kind": "normal", "mean": 20, "std": 5, "min": 5, "max": 40},
                          shared_prefix={"groups": 3, "tokens": 30})
    prompts = synthetic_prompts(w, TOK, 40, seed=1)
    lengths = w.prompt_tokens.sample(40, seed=0)  # a different seed: only the range matters here
    assert all(60 - 2 <= p.prompt_tokens_client <= 120 + 2 for p in prompts), lengths[:3]
    assert all(5 <= p.output_tokens <= 40 for p in prompts)
    assert {p.group for p in prompts} == {0, 1, 2}
    for g in range(3):
        heads = {p.messages[-1]["content"].split("\n")[0] for p in prompts if p.group == g}
        assert len(heads) == 1 and count_tokens(TOK, heads.pop()) == 30
    bodies = [p.messages[-1]["content"].split("\n")[1] for p in prompts]
    assert len(set(bodies)) == 40  # beyond the group prefix, no two prompts share text


def test_conversations_and_json_prompts():
    w = SyntheticWorkload(prompt_tokens=40, output_tokens=8, conversation={"turns": 3}, response_format="json_schema")
    prompts = synthetic_prompts(w, TOK, 4, seed=0)
    assert all(len(p.follow_ups) == 2 for p in prompts)
    assert all(p.schema == ANSWER_SCHEMA for p in prompts)
    content, n_user, n_out = prompts[0].follow_ups[0]
    assert n_out == 8 and n_user == count_tokens(TOK, content) and "JSON" in content


def test_each_distribution_describes_and_bounds_itself():
    cases = [(dist_of(64), "64", (64, 64), 64.0),
             (dist(kind="uniform", min=10, max=90), "uniform 10-90", (10, 90), 50.0),
             (dist(kind="normal", mean=50, std=20, min=5, max=80), "normal mean 50, sd 20, clipped 5-80", (5, 80),
              None),
             (dist(kind="lognormal", median=60, sigma=0.9, min=3, max=400),
              "lognormal median 60, sigma 0.9, clipped 3-400", (3, 400), None)]
    for d, words, bounds, mean in cases:
        assert d.describe() == words and d.bounds() == bounds
        if mean is not None:
            assert d.mean_tokens() == mean
    # Clipping moves the mean off the formula: a seeded sample estimates it.
    assert dist(kind="normal", mean=50, std=20, min=5, max=80).mean_tokens() == pytest.approx(49.62415)


def test_seeded_samples_are_the_reference_values():
    """Reference runs stay comparable: the same seed draws the same lengths as before."""
    assert dist(kind="uniform", min=10, max=90).sample(5, seed=0) == [78, 61, 51, 31, 34]
    assert dist(kind="lognormal", median=60, sigma=0.9, min=3, max=400).sample(5, seed=5) == [29, 18, 48, 88, 167]
