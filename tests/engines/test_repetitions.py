"""Repetitions on a real engine: an A/A pair of llama.cpp arms and a known-effect arm (a third
replica behind the harness's delay relay, 20 ms added to every gap between token events), two
repetitions interleaved A B C then C B A at one client, each begun with a fresh engine start. The verdict
never ranks the A/A pair, never ranks the slowed arm ahead, and checks the known effect; the realized
prefix cache reads cold, and every passport carries the run's one harness revision. Each repetition
also runs a capacity search of one probe (one client, the largest load allowed, under an SLO it meets);
the climb and the bisection are tested against a server whose capacity is known by construction
(tests/unit/capacity/test_engine_search.py)."""
import json

import pytest
from stackbook.loadgen.records import read_records

pytestmark = pytest.mark.engine

CAMPAIGN = """
name: aa-test
description: an A/A pair, two interleaved repetitions
model: {source: embedded}
protocol:
  decoding: {preset: greedy}
  workload: {kind: synthetic, prompt_tokens: 48, output_tokens: 8}
  arrival: {kind: closed_loop, concurrency: [1]}   # one load: the truth of the known effect is known there
  context_length: 512
  requests_per_point: 12
  warmup_requests: 1
  repetitions: 2
  decision: {min_effect: 0.05, confidence: 0.99, metrics: [output_throughput, tpot_p50, e2e_p50]}
  slo: {ttft_ms: 5000, tpot_ms: 500, attainment: 0.6}   # 6 requests, all inside, prove it: one try a probe
  capacity: {start: 1, max_load: 1, requests: 6, max_requests: 12, max_probes: 2, max_wall_s: 120}
  canaries: {suite: SUITE}   # two gating checks: the gate's own tests are test_gate's and test_end_to_end's
arms:
  - name: first
    engine: {kind: llama_cpp, threads: 1, parallel: 2}
  - name: second
    replicate_of: first
  - name: slow
    replicate_of: first
    known_delay: {tpot_ms: 20}
"""
ARMS = ("first", "second", "slow")


@pytest.fixture(scope="module")
def run(run_module_campaign, tmp_path_factory, test_run_id, canary_subset):
    campaign = CAMPAIGN.replace("SUITE", canary_subset("capital-of-france", "two-plus-two"))
    return run_module_campaign(campaign, tmp_path_factory.mktemp("aa") / "aa.yaml",
                               run_id=test_run_id)


def test_repetitions_interleave_and_each_begins_with_a_fresh_engine(run):
    manifest = json.loads(run.manifest.read_text())
    assert manifest["status"] == "complete", json.dumps(manifest, indent=1)[:2000]
    reps = manifest["repetitions"]
    assert [r["order"] for r in reps["rounds"]] == [list(ARMS), list(reversed(ARMS))]
    assert reps["ran"] == 2 and reps["stopped"] == "after 2 repetitions: fixed by the protocol (min = max)"
    for arm in ARMS:
        entry = manifest["arms"][arm]
        assert entry["engine_starts"] == 2 and entry["repetitions_done"] == [0, 1]
        passport = json.loads(run.arm(arm).passport_json.read_text())
        began = passport["protocol"]["repetitions"]["began"]
        assert set(began) == {"0", "1"} and all(b.startswith("fresh engine start") for b in began.values())
        assert passport["validity"]["engine_restarts"] == 0
        points = {r.point for r in read_records(run.arm(arm).requests, latest_attempt=True) if r.phase == "measure"}
        assert points == {"c1-r0", "c1-r1"}
        assert not json.loads(run.arm(arm).results.read_text())["sweep"]["discards"]  # every point ranked
        # Round 1 ran second first: its repetition 1 finished before first's.
    log = {a: manifest["arms"][a]["repetition_log"]["1"]["finished_unix"] for a in ("first", "second")}
    assert log["second"] < log["first"]


def test_the_verdict_never_ranks_identical_arms(run):
    analysis = json.loads(run.analysis.read_text())
    decisions = [d for d in analysis["decisions"] if {d["arm_a"], d["arm_b"]} == {"first", "second"}]
    assert {(d["load"], d["metric"]) for d in decisions} == {(1, m)
                                                             for m in ("output_throughput", "tpot_p50", "e2e_p50")}
    assert all(d["decision"] in ("no difference", "undecided") and d["leader"] is None for d in decisions)
    assert all(d["repetitions_a"] == d["repetitions_b"] == 2 and d["requests_a"] == 24 for d in decisions)
    assert any(line.startswith("A/A control second (a replica of first): nothing ranked")
               for line in analysis["verdict"])


def test_the_known_effect_arm_is_relayed_checked_and_never_ranked_ahead(run):
    """Whether two rounds at 99% find the effect is the rule's power on this host, which
    campaigns/known-effect.yaml and benchmarks/sequential_power.py measure; what must hold on any
    host is that the slowed arm is never ranked ahead and the verdict checks the control."""
    analysis = json.loads(run.analysis.read_text())
    for other in ("first", "second"):
        tpot = [d for d in analysis["decisions"] if {d["arm_a"], d["arm_b"]} == {other, "slow"}
                and d["metric"] == "tpot_p50"]
        assert [d["load"] for d in tpot] == [1]
        assert all(d["leader"] in (None, other) for d in tpot), tpot
    [line] = [v for v in analysis["verdict"] if v.startswith("Known-effect control slow")]
    assert line.startswith("Known-effect control slow (first plus 20 ms a token gap): found in "), line
    assert "concurrency 1, TPOT p50:" in line and "thins the engine's batch" not in line
    relay = json.loads(run.arm("slow").engine_json.read_text())["known_delay"]
    assert relay["added_tpot_ms"] == 20 and relay["held_token_events"] > 0 and relay["listens"].startswith("http://127.0.0.1:")
    assert relay["release_late_ms"]["mean"] is not None
    assert json.loads(run.arm("first").engine_json.read_text())["known_delay"] is None


def test_the_fairness_table_reads_a_cold_cache_and_one_harness_revision(run):
    analysis = json.loads(run.analysis.read_text())
    rows = {r["arm"]: r for r in analysis["fairness"]}
    for arm in ARMS:
        assert rows[arm]["prefix_cache"].startswith("cold (configured cold): at most 0% of prompt tokens from cache")
        assert rows[arm]["comparable"]
    harness = {rows[a]["harness"] for a in rows}
    manifest = json.loads(run.manifest.read_text())
    assert len(harness) == 1 and manifest["harness"]["commit"] in harness.pop()


def test_each_repetition_searched_the_capacity_on_its_own_engine(run):
    analysis = json.loads(run.analysis.read_text())
    rows = {r["arm"]: r for r in analysis["capacity"]}
    assert set(rows) == set(ARMS)
    for arm in ARMS:
        cap = json.loads(run.arm(arm).results.read_text())["capacity"]
        assert set(cap["rounds"]) == {"0", "1"}
        for r in cap["rounds"].values():
            # One client meets a 5 s TTFT bound: the search stops at the largest load allowed and says so.
            assert r["lower"] == 1 and r["upper"] is None and not r["resolved"], r
            assert "the capacity may lie above it" in r["stop_reason"]
            inside = [p for p in r["probes"] if p["verdict"] == "inside"]
            assert [p["load"] for p in inside] == [1] and all(p["met"] == p["requests"] for p in inside)
        probes = {rec.point for rec in read_records(run.arm(arm).capacity_requests)}
        assert probes and all(p.startswith("cap-r") for p in probes)
        sweep_points = {rec.point for rec in read_records(run.arm(arm).requests)}
        assert not any(p.startswith("cap-") for p in sweep_points)  # kept apart from the sweep
        assert rows[arm]["lower"] == 1 and rows[arm]["upper"] is None
        assert "may lie higher" in rows[arm]["sentence"]
    prediction = {(p["arm"], p["prediction"]): p for p in analysis["capacity_predictions"]}
    assert prediction[("first", "engine: live sequences it allows")]["predicted"] == 2  # parallel: 2
