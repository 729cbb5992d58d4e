"""Which points a resumed sweep measures again: one the engine never answered (it froze through
every measured request) is run again, like one its death cut short; one it answered is kept."""
from stackbook.loadgen.records import RequestRecord
from stackbook.measure.sweep import latest_attempts, not_answered

from tests.support.records import request_record


def rec(point: str, i: int, error: str = "none", attempt: int = 0) -> RequestRecord:
    return request_record(point=point, request_index=i, attempt=attempt, error_class=error)


def test_a_point_the_engine_never_answered_is_measured_again():
    frozen = [rec("c2-r0", i, "timeout") for i in range(4)]
    answered = [rec("c1-r0", i) for i in range(4)]
    partly = [rec("c4-r0", 0), *(rec("c4-r0", i, "timeout") for i in range(1, 4))]
    assert not_answered(frozen) and not not_answered(answered) and not not_answered(partly)
    assert latest_attempts(answered + frozen + partly) == {"c1-r0": (0, 4), "c2-r0": (0, 0), "c4-r0": (0, 4)}
    again = [rec("c2-r0", i, attempt=1) for i in range(4)]
    assert latest_attempts(frozen + again)["c2-r0"] == (1, 4)


def test_the_sweep_runs_again_only_points_not_finished_each_as_its_next_attempt():
    from stackbook.config.protocol import Protocol
    from stackbook.measure.sweep import load_levels, points_to_run, requests_at

    p = Protocol(requests_per_point=4, warmup_requests=1, arrival={"kind": "closed_loop", "concurrency": [1, 2]})
    n1, n2 = (requests_at(p, lv) for lv in load_levels(p))
    done = {"c1-r0": (0, n1), "c2-r0": (1, n2 - 1)}  # c1-r0 finished; c2-r0's second attempt was cut short
    todo = [(pt.repetition, pt.load.concurrency, pt.name, pt.requests, pt.attempt)
            for pt in points_to_run(p, p.arrival.loads(), [0, 1], done)]
    assert todo == [(0, 1, "c1-r0", n1, None), (0, 2, "c2-r0", n2, 2), (1, 1, "c1-r1", n1, 0), (1, 2, "c2-r1", n2, 0)]
