"""A load point read from an arrival pattern's level gives the level back unchanged, names its
points as the committed runs name them, and answers what the sweep and the analysis ask of a load."""
import json

import pytest
from stackbook.config.protocol import Protocol
from stackbook.loadgen.load_point import Load, LoadPoint
from stackbook.measure import sweep
from stackbook.locations import REPO_ROOT

TRACE = str(REPO_ROOT / "campaigns/traces/example-agentx.jsonl")


def protocol(arrival, **kw):
    return Protocol(arrival=arrival, workload={"kind": "synthetic", "prompt_tokens": 32, "output_tokens": 8}, **kw)


ARRIVALS = [{"kind": "closed_loop", "concurrency": [1, 4]}, {"kind": "poisson", "rates": [0.5, 2]},
            {"kind": "constant", "rates": [3]}, {"kind": "gamma", "rates": [1.5], "burstiness": 2},
            {"kind": "trace", "path": TRACE, "format": "weka", "speedup": 2, "length_scale": 0.5}]


@pytest.mark.parametrize("arrival", ARRIVALS, ids=lambda a: a["kind"])
def test_a_load_gives_its_level_back_byte_for_byte(arrival):
    p = protocol(arrival, context_length=2048)
    for level, load in zip(p.arrival.load_levels(), p.arrival.loads(), strict=True):
        assert json.dumps(load.level()) == json.dumps(level)
        assert load == Load.of(level) and load.label == level["level"]
        point = LoadPoint.in_sweep(load, 1, 7, 0)
        assert point.name == sweep.point_name(level, 1) == f"{level['level']}-r1"


def test_each_kind_answers_for_its_own_unit():
    c, r, t = Load.clients(4), Load.of({"level": "rate0.5", "rate": 0.5}), Load.of(
        {"level": "trace", "trace": "x.jsonl", "speedup": 2.0})
    assert (c.kind, c.closed_loop, c.scheduled, c.concurrency, c.rate, c.speedup) == ("clients", True, False, 4,
                                                                                      None, None)
    assert (r.kind, r.closed_loop, r.scheduled, r.concurrency, r.rate, r.speedup) == ("rate", False, True, None,
                                                                                      0.5, None)
    assert (t.kind, t.closed_loop, t.scheduled, t.speedup, t.trace) == ("replay", False, False, 2.0, "x.jsonl")
    assert c.level() == {"level": "c4", "concurrency": 4} and c.fields() == {"concurrency": 4}
    assert r.fields() == {"rate": 0.5} and t.fields() == {"speedup": 2.0}


def test_a_points_records_carry_its_name_attempt_and_clients():
    closed = LoadPoint.in_sweep(Load.clients(2), 0, 9, 1)
    assert closed.record_fields("run", "arm-a") == {"run_id": "run", "arm": "arm-a", "point": "c2-r0",
                                                    "repetition": 0, "concurrency": 2, "attempt": 1}
    scheduled = LoadPoint.in_sweep(Load.of({"level": "rate2", "rate": 2.0}), 3, 9, None)
    assert scheduled.finished and scheduled.record_fields("run", "a")["concurrency"] == 0
    assert scheduled.name == "rate2-r3"
