"""Connection set-up time, recorded on the first request of each new connection, is summed up per
point apart from TTFT."""
import pytest
from stackbook.config.protocol import Slo
from stackbook.measure.metrics import connection_setup, point_summary

from tests.support.records import request_record


def rec(i, phase, connect_s):
    return request_record(point="p", phase=phase, concurrency=2, request_index=i, scheduled_s=i, sent_s=i,
                          first_token_s=i + 0.2, end_s=i + 0.5, chunk_times_s=[i + 0.2, i + 0.5], chunk_tokens=[1, 1],
                          prompt_tokens_client=4, output_tokens_client=2, output_tokens_requested=2,
                          finish_reason="length", connect_s=connect_s)


def test_connections_opened_and_their_set_up_time():
    records = [rec(0, "warmup", 0.030), rec(1, "warmup", 0.050), rec(2, "measure", None), rec(3, "measure", 0.010),
               rec(4, "measure", None)]
    got = connection_setup(records)
    assert got["connections_opened"] == 3 and got["measured_requests_on_new_connections"] == 1
    assert got["connect_ms_max"] == pytest.approx(50) and got["connect_ms_mean"] == pytest.approx(30)
    assert point_summary(records, Slo())["connections_opened"] == 3
    assert connection_setup([rec(0, "measure", None)]) == {"connections_opened": 0, "connect_ms_max": None,
                                                           "connect_ms_mean": None,
                                                           "measured_requests_on_new_connections": 0}
