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
