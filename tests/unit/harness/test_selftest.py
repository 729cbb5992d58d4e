"""The harness's ceiling against the calibration server (a zero-latency instrument): the rate
ladder from one and from several client processes, and the command that prints both."""
import json

import pytest
from pydantic import TypeAdapter
from typer.testing import CliRunner

from stackbook.cli import app
from stackbook.config.arrival_patterns import Arrival
from stackbook.harness.selftest import LADDER_SCHEDULES, QUICK_LADDER, ladder_schedule, rate_ladder


@pytest.mark.parametrize("kind", sorted(LADDER_SCHEDULES))
def test_the_ladder_sends_the_campaigns_own_schedule(kind):
    pattern = TypeAdapter(Arrival).validate_python({"kind": kind, "rates": [40]})
    plan = pattern.point_plan({"level": "rate40", "rate": 40}, 60, 40, cooldown=0)
    assert ladder_schedule(kind, 40, 60, 40) == plan.schedule
    assert len(plan.schedule) == 60 and plan.schedule == sorted(plan.schedule)


def test_a_ladder_on_a_closed_loop_is_refused_by_name():
    with pytest.raises(ValueError, match="arrivals must be one of .*constant.*poisson.*not 'closed'"):
        rate_ladder("http://127.0.0.1:9", [10], arrivals="closed")


def test_the_ladder_from_two_processes_records_each_rung(start_calibration_server):
    server = start_calibration_server()
    held, ladder = rate_ladder(server.base_url, [20, 40], processes=2, arrivals="constant", seconds=1.5)
    # A busy host may miss the 5 ms bound even at 40 req/s: the ladder then stops there, and says so.
    assert [r["rate_rps"] for r in ladder] == [20, 40][:len(ladder)]
    assert held == max([0] + [r["rate_rps"] for r in ladder if r["held"]])
    assert all(r["held"] == (r["lag_p99_ms"] <= 5) for r in ladder)
    for row in ladder:
        assert row["processes"] == 2 and row["errors"] == 0
        assert abs(row["achieved_rps"] - row["rate_rps"]) <= 0.05 * row["rate_rps"]
        assert 0 < row["client_cpu_fraction"] < 1 and row["lag_p99_ms"] < 100


def test_selftest_prints_the_one_and_the_n_process_ladders():
    result = CliRunner().invoke(app, ["selftest", "--quick", "--processes", "2", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["processes"] == 2
    for ladder, held in ((out["rate_ladder"], out["max_open_loop_rate_rps"]),
                         (out["rate_ladder_processes"], out["max_open_loop_rate_rps_processes"])):
        assert [r["rate_rps"] for r in ladder] == QUICK_LADDER[:len(ladder)]
        assert held == max([0] + [r["rate_rps"] for r in ladder if r["held"]])
    assert {r["processes"] for r in out["rate_ladder_processes"]} == {2}
    assert out["ttft_floor_ms_p50"] > 0 and out["streamed_events_per_s"] > 0
