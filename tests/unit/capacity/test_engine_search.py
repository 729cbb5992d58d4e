"""The capacity search over HTTP against the knee-scheduled calibration server, whose capacity is
known by construction: at most 4 sequences decode together and a step over b takes 10 + 40·b ms,
so TPOT is 50, 90, 130 and 170 ms at 1 to 4 clients. Under a 110 ms TPOT bound the capacity is
2 clients, with 20 ms on either side of the bound (a host's stalls would have to add that to
every token of a fifth of the requests to move a verdict)."""
import json

import pytest

from stackbook.harness.knee_scheduler import Knee
from stackbook.steps import capacity as capacity_step
from stackbook.steps.session import open_arm

KNEE = Knee(max_batch=4, t0_ms=10, t1_ms=40, admit_window_ms=3)


def _campaign(tmp_path, base_url: str) -> str:
    path = tmp_path / "knee.yaml"
    path.write_text(f"""
name: knee
model: {{name: calibration, source: remote}}
protocol:
  stages: [sweep]
  canaries: {{run_sweep_on_hold: true}}
  workload: {{kind: synthetic, prompt_tokens: 16, output_tokens: 4}}
  arrival: {{kind: closed_loop, concurrency: [1]}}
  context_length: 512
  requests_per_point: 5
  repetitions: 1
  warmup_requests: 1
  slo: {{ttft_ms: 1000, tpot_ms: 110, attainment: 0.8}}
  capacity: {{requests: 30, max_requests: 60, max_probes: 8}}
arms:
  - name: cal
    engine: {{kind: openai_endpoint, base_url: "{base_url}/v1", served_model: calibration}}
""")
    return str(path)


def test_the_search_brackets_the_known_capacity_and_resumes_from_its_records(tmp_path, start_calibration_server):
    server = start_calibration_server(knee=KNEE)
    session = open_arm(_campaign(tmp_path, server.base_url), run_dir=str(tmp_path / "run"),
                       endpoint=server.base_url + "/v1")
    out = capacity_step.arm_capacity(session, progress=False)
    round0 = out["rounds"]["0"]
    assert (round0["lower"], round0["upper"], round0["resolved"]) == (2, 3, True)
    assert [(p["load"], p["verdict"]) for p in round0["probes"]] == [(1, "inside"), (2, "inside"),
                                                                     (4, "outside"), (3, "outside")]
    # Each probe measured the count asked and held its load; its verdict is re-derivable from met/requests.
    assert all(p["requests"] == 30 and p["load_held"] for p in round0["probes"])
    assert round0["probes"][0]["met"] == 30 and round0["probes"][2]["met"] == 0
    stored = json.loads(session.arm_dir.results.read_text())["capacity"]
    assert stored["rounds"]["0"]["upper"] == 3 and stored["target"] == 0.8
    lines = session.arm_dir.capacity_requests.read_text().splitlines()
    assert len(lines) == sum(1 + 30 + (p["load"] - 1) for p in round0["probes"])  # warm-up, measured, cool-down

    # An interrupted search resumes from its records: nothing is sent again and the path is retraced.
    results = json.loads(session.arm_dir.results.read_text())
    results.pop("capacity")
    session.arm_dir.results.write_text(json.dumps(results))
    server.stop()
    again = capacity_step.arm_capacity(session, progress=False)
    assert again["rounds"]["0"]["probes"] == round0["probes"]
    assert len(session.arm_dir.capacity_requests.read_text().splitlines()) == len(lines)
    assert set(capacity_step.rounds_table(again).columns) >= {"highest proven inside", "lowest proven outside"}


def test_a_capacity_search_needs_a_closed_loop_and_a_sweep(tmp_path):
    from stackbook.config.errors import CampaignError
    from stackbook.config.loading import load_campaign

    base = _campaign(tmp_path, "http://127.0.0.1:9")
    text = open(base).read()
    open(base, "w").write(text.replace("arrival: {kind: closed_loop, concurrency: [1]}",
                                       "arrival: {kind: poisson, rates: [1]}"))
    with pytest.raises(CampaignError, match="capacity searches closed-loop concurrency"):
        load_campaign(base)
    open(base, "w").write(text.replace("max_requests: 60", "max_requests: 20"))
    with pytest.raises(CampaignError, match="max_requests 20 is below capacity.requests 30"):
        load_campaign(base)


def test_a_search_that_could_never_prove_the_target_is_refused_and_the_plan_says_what_proves_it(tmp_path):
    from stackbook.capacity.verdict import requests_to_prove
    from stackbook.config.errors import CampaignError
    from stackbook.config.loading import load_campaign
    from stackbook.run_checks.preflight import capacity_sample_note
    from stackbook.measure.slo_bounds import wilson_interval

    # The fewest requests that, all inside, prove the target: one fewer does not.
    for target in (0.8, 0.9, 0.99):
        n = requests_to_prove(target)
        assert wilson_interval(n, n)[0] >= target > wilson_interval(n - 1, n - 1)[0]
    base = _campaign(tmp_path, "http://127.0.0.1:9")
    text = open(base).read()
    open(base, "w").write(text.replace("attainment: 0.8", "attainment: 0.99"))
    with pytest.raises(CampaignError, match="max_requests 60 cannot prove slo.attainment 0.99.*at least 381"):
        load_campaign(base)
    open(base, "w").write(text.replace("attainment: 0.8", "attainment: 1"))
    with pytest.raises(CampaignError, match="no sample shows that every request"):
        load_campaign(base)
    open(base, "w").write(text.replace("requests: 30, max_requests: 60", "requests: 10, max_requests: 60"))
    note = capacity_sample_note(load_campaign(base).protocol, "protocol.capacity")
    assert "at least 16 of its requests" in note and "a first probe of 10 cannot" in note
