"""Every committed run agrees with the code in main: its files read under the current models, a
few derived figures recomputed from its raw records match what its results say, and its analysis
is what the current analysis computes from those records."""
import json
import math
from pathlib import Path

import pytest
from stackbook.analysis.comparison import analyse_run
from stackbook.config.loading import load_campaign
from stackbook.evidence.results import ArmResults
from stackbook.evidence.rundir import RunDir
from stackbook.loadgen.records import read_records
from stackbook.measure.metrics import point_summary

RUNS = sorted(p.parent for p in Path("outputs").glob("*/*/manifest.json"))


def close(a, b, rel=1e-9):
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-9)


def test_every_committed_run_is_checked():
    assert {p.parent.name for p in RUNS} >= {"quickstart", "workloads", "three-engines", "burstiness", "aa-control"}


@pytest.mark.parametrize("run_path", RUNS, ids=[f"{p.parent.name}/{p.name}" for p in RUNS])
def test_points_recomputed_from_raw_records_match_the_results(run_path):
    run = RunDir(run_path)
    campaign = load_campaign(run.campaign_resolved)
    for arm in campaign.arms:
        d = run.arm(arm.name)
        results = json.loads(d.results.read_text()) if d.results.exists() else {}
        sweep = results.get("sweep")
        if not sweep:
            continue
        records = read_records(d.requests, latest_attempt=True)
        slo = campaign.protocol_for(arm).slo
        for name, point in sweep["points"].items():
            again = point_summary([r for r in records if r.point == name], slo)
            for key in ("completed", "ttft_ms_p50", "e2e_ms_p99", "output_throughput_tok_s", "achieved_rate_rps",
                        "scheduled_rate_rps", "slo_attainment"):
                if key in point:
                    assert close(again.get(key), point[key]), (arm.name, name, key, again.get(key), point[key])
        label = ArmResults.model_validate(results).label().value
        assert label == sweep.get("label", label), (arm.name, label)


@pytest.mark.parametrize("run_path", [p for p in RUNS if (p / "analysis.json").exists()],
                         ids=[f"{p.parent.name}/{p.name}" for p in RUNS if (p / "analysis.json").exists()])
def test_the_committed_analysis_follows_from_the_records(run_path):
    stored = json.loads((run_path / "analysis.json").read_text())
    again = json.loads(analyse_run(RunDir(run_path)).model_dump_json())
    for key in ("verdict", "decisions", "load_table", "fairness", "slo_capacity", "pareto_frontier"):
        assert again.get(key) == stored.get(key), key
