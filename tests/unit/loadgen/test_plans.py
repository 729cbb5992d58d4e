"""Every arrival pattern makes a typed point plan, and the sweep, the client processes and the
load-validity rules act on the plan, whatever the pattern's level keys."""
import json
import typing

import pytest
from stackbook.config.arrival_patterns import Arrival
from stackbook.config.protocol import Protocol
from stackbook.loadgen import arrivals
from stackbook.loadgen.client_processes import shares_for
from stackbook.loadgen.drivers import Target
from stackbook.loadgen.plans import ClosedPlan, OpenPlan, TracePlan
from stackbook.loadgen.workload import ApproximateTokenizer, synthetic_prompts
from stackbook.measure import point_meter, sweep
from stackbook.measure.validity import point_validity

TOK = ApproximateTokenizer()
KINDS = [typing.get_args(m)[0] for m in
         (model.model_fields["kind"].annotation for model in typing.get_args(typing.get_args(Arrival)[0]))]


def arrival_of(kind, tmp_path):
    if kind == "closed_loop":
        return {"kind": kind, "concurrency": [3]}
    if kind == "trace":
        path = tmp_path / "t.jsonl"
        path.write_text("".join(json.dumps({"timestamp_s": 10 + t, "prompt_tokens": 20, "output_tokens": 5}) + "\n"
                                for t in (0, 1, 3)))
        return {"kind": kind, "path": str(path), "speedup": 2}
    return {"kind": kind, "rates": [4]}


def protocol(arrival):
    return Protocol(arrival=arrival, workload={"kind": "synthetic", "prompt_tokens": 32, "output_tokens": 8},
                    warmup_requests=2, requests_per_point=6)


def test_the_kinds_are_the_campaigns():
    assert sorted(KINDS) == ["closed_loop", "constant", "gamma", "poisson", "trace"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_arrival_pattern_makes_its_plan(kind, tmp_path):
    p = protocol(arrival_of(kind, tmp_path))
    [level] = p.arrival.load_levels()
    n = sweep.requests_at(p, level)
    prompts, plan = point_meter.point_requests(p, level, n, 1, TOK, sentinels=[])
    assert type(plan) is p.arrival.plan_type
    assert isinstance(plan, (OpenPlan, ClosedPlan))
    if kind == "closed_loop":  # three clients, two prompts after the measured ones
        assert plan == ClosedPlan(concurrency=3, cooldown=2)
        assert prompts == synthetic_prompts(p.workload, TOK, n, seed=1 * 1000 + 3)
    elif kind == "trace":      # the trace's own clock at twice its speed, its own lengths, no cool-down
        assert plan == TracePlan(schedule=[0.0, 0.5, 1.5], cooldown=0)
        assert prompts == synthetic_prompts(p.workload, TOK, 3, seed=1, lengths=[(20, 5)] * 3)
    else:                      # the seeded schedule at 4 req/s, as many cool-down prompts as warm-up
        expected = {"constant": arrivals.constant_schedule(4, n), "poisson": arrivals.poisson_schedule(4, n, 1),
                    "gamma": arrivals.gamma_schedule(4, n, 1.0, 1)}[kind]
        assert plan == OpenPlan(schedule=expected, cooldown=2) and len(prompts) == n == 10
        assert prompts == synthetic_prompts(p.workload, TOK, n, seed=1 * 1000 + 4000)


@pytest.mark.parametrize("kind", KINDS)
def test_client_processes_and_validity_dispatch_on_the_plan(kind, tmp_path):
    p = protocol(arrival_of(kind, tmp_path))
    [level] = p.arrival.load_levels()
    prompts, plan = point_meter.point_requests(p, level, sweep.requests_at(p, level), 0, TOK, sentinels=[])
    target = Target("http://127.0.0.1:1", "m", {}, {})
    shares = shares_for(plan, target, prompts, TOK, processes=2, parts_dir=tmp_path / "parts", warmup=2, base={})
    assert sorted(i for s in shares for i in s.positions) == list(range(len(prompts)))
    assert all(type(s.plan) is type(plan) and s.plan.cooldown == plan.cooldown for s in shares)
    if isinstance(plan, ClosedPlan):  # the clients split: 2 and 1
        assert [s.plan.concurrency for s in shares] == [2, 1]
        v = point_validity({"concurrency": 3, "in_flight_mean": 2.95}, plan=p.arrival.plan_type)
        assert v == {"configured_concurrency": 3, "in_flight_mean": 2.95, "littles_law_concurrency": None,
                     "valid": True}
    else:                             # each share keeps its prompts' own deadlines
        assert all(s.plan.schedule == [plan.schedule[i] for i in s.positions] for s in shares)
        v = point_validity({"schedule_lag_ms_p99": 6.0, "scheduled_rate_rps": 4.0, "achieved_rate_rps": 4.0},
                           plan=p.arrival.plan_type)
        assert v["valid"] is False and v["schedule_lag_ms_p99"] == 6.0 and "configured_concurrency" not in v
