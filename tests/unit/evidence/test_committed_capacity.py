"""Every committed capacity search follows from its raw records: each probe judged again from
capacity_requests.jsonl gives the stored verdict and count, the search replayed on those verdicts
takes the same path to the same interval, and the analysis's interval and sentence are what the
rounds prove."""
import json
from pathlib import Path

import pytest
from stackbook.analysis.capacity_summary import capacity_sentence
from stackbook.capacity.engine_probe import judge_probe
from stackbook.capacity.predictions import combined_interval
from stackbook.capacity.search import search_capacity
from stackbook.capacity.verdict import ProbeVerdict
from stackbook.config.loading import load_campaign
from stackbook.evidence.rundir import RunDir
from stackbook.loadgen.records import read_records

RUNS = sorted(p.parent.parent.parent for p in Path("outputs").glob("*/*/arms/*/capacity_requests.jsonl"))


def test_a_committed_run_searched_capacity():
    assert any(p.parent.name == "capacity" for p in RUNS)


@pytest.mark.parametrize("run_path", sorted(set(RUNS)), ids=[f"{p.parent.name}/{p.name}" for p in sorted(set(RUNS))])
def test_the_capacity_follows_from_the_probe_records(run_path):
    run = RunDir(run_path)
    campaign = load_campaign(run.campaign_resolved)
    analysis = {r["arm"]: r for r in json.loads(run.analysis.read_text())["capacity"]}
    for arm in campaign.arms:
        d = run.arm(arm.name)
        if not d.capacity_requests.exists():
            continue
        protocol = campaign.protocol_for(arm)
        cap = json.loads(d.results.read_text())["capacity"]
        records = read_records(d.capacity_requests, latest_attempt=True)
        for rep, r in cap["rounds"].items():
            stored = []
            for p in r["probes"]:
                verdict, figures = judge_probe(int(p["load"]), [x for x in records if x.point == p["point"]],
                                               protocol.slo)
                assert (verdict.verdict, verdict.met, verdict.requests) == (p["verdict"], p["met"], p["requests"]), p
                stored.append(ProbeVerdict(p["load"], p["verdict"], p["reason"], p["requests"], p["duration_s"],
                                           p["met"]))
            replay = iter(stored)
            again = search_capacity(lambda load, n: next(replay), protocol.capacity.plan())
            assert [v.load for v in again.probes] == [p["load"] for p in r["probes"]]
            assert (again.lower, again.upper, again.stop_reason) == (r["lower"], r["upper"], r["stop_reason"])
        lower, upper, _ = combined_interval(list(cap["rounds"].values()))
        row = analysis[arm.name]
        assert (row["lower"], row["upper"]) == (lower, upper)
        assert row["sentence"] == capacity_sentence(arm.name, lower, upper, cap["slo"], cap["target"])
