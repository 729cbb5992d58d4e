"""The harness ceiling in every run: measured at campaign start against the calibration server,
remembered for this host, and a point offered above it invalid by the load rule."""
from typer.testing import CliRunner

from stackbook.cli import app
from stackbook.config.loading import parse_campaign
from stackbook.harness import ceiling
from stackbook.loadgen.plans import OpenPlan
from stackbook.measure.validity import above_ceiling, point_validity

OPEN_LOOP = {"name": "t", "protocol": {"workload": {"kind": "synthetic", "prompt_tokens": 64, "output_tokens": 16},
                                       "arrival": {"kind": "poisson", "rates": [2, 900]}},
             "arms": [{"name": "a", "engine": {"kind": "llama_cpp"}}]}


def test_the_ceiling_is_measured_here_and_remembered_for_this_host(tmp_path, monkeypatch):
    monkeypatch.setenv("STACKBOOK_CACHE", str(tmp_path))
    record = ceiling.campaign_ceiling(parse_campaign(OPEN_LOOP))
    ladder = record["ladder"]
    # A busy host may miss the 5 ms bound on the first rung: the ladder then stops there, and says so.
    assert [r["rate_rps"] for r in ladder] == ceiling.CAMPAIGN_LADDER[:len(ladder)]
    assert record["max_open_loop_rate_rps"] == max([0] + [r["rate_rps"] for r in ladder if r["held"]])
    assert record["first_rate_not_held"] == (None if ladder[-1]["held"] else ladder[-1]["rate_rps"])
    assert record["host"] == ceiling.host_key() and record["processes"] == 1
    assert record["seconds"] < 30
    remembered = ceiling.last_ceiling(1)
    assert remembered["max_open_loop_rate_rps"] == record["max_open_loop_rate_rps"] and "ladder" not in remembered
    assert ceiling.last_ceiling(2) is None   # another client-process count: not measured


def test_a_point_offered_above_the_ceiling_is_invalid_and_one_below_stands():
    measured = {"max_open_loop_rate_rps": 400, "first_rate_not_held": 800, "ladder_top_held": False, "processes": 1}
    above = {"rate": 900, "scheduled_rate_rps": 905.0, "achieved_rate_rps": 904.0, "schedule_lag_ms_p99": 0.5}
    v = point_validity(above, measured, plan=OpenPlan)
    assert v["valid"] is False
    assert v["above_harness_ceiling"] == ("offered 905 req/s, at or above 800 req/s, the first rate the harness did "
                                          "not hold at campaign start")
    below = {"rate": 2, "scheduled_rate_rps": 2.0, "achieved_rate_rps": 2.0, "schedule_lag_ms_p99": 0.5}
    assert point_validity(below, measured, plan=OpenPlan)["valid"] is True
    assert above_ceiling(600.0, measured) is None          # between held and not held: not known
    # A busy host that held no rung (50 req/s missed): 2 req/s is not judged by it, 60 req/s is.
    none_held = {"max_open_loop_rate_rps": 0.0, "first_rate_not_held": 50, "ladder_top_held": False}
    assert above_ceiling(2.0, none_held) is None and above_ceiling(60.0, none_held) is True
    # Every rung held: the ceiling lies above the ladder's top, so nothing is judged above it.
    assert above_ceiling(905.0, measured | {"first_rate_not_held": None, "ladder_top_held": True}) is None
    assert point_validity(above, plan=OpenPlan)["valid"] is True    # no ceiling recorded: the rate rule alone


def test_run_check_warns_about_a_rate_above_the_ceiling_last_measured_here(tmp_path, monkeypatch):
    monkeypatch.setenv("STACKBOOK_CACHE", str(tmp_path))
    ceiling.remember({"max_open_loop_rate_rps": 400, "first_rate_not_held": 800, "ladder_top_held": False,
                      "processes": 1, "host": ceiling.host_key(), "measured_unix": 1.0})
    campaign = parse_campaign(OPEN_LOOP)
    assert ceiling.ceiling_warnings(campaign) == [
        "arm a: rate 900 req/s is beyond the harness ceiling last measured on this host (it did not hold 800 req/s "
        "with 1 client process(es)): that point will be invalid; raise protocol.loadgen.processes or lower the rate"]
    path = tmp_path / "c.yaml"
    path.write_text(__import__("yaml").safe_dump(OPEN_LOOP))
    result = CliRunner().invoke(app, ["run", str(path), "--check"])
    assert result.exit_code == 0 and "warning: arm a: rate 900 req/s is beyond the harness ceiling" in result.output
    low = OPEN_LOOP | {"protocol": OPEN_LOOP["protocol"] | {"arrival": {"kind": "poisson", "rates": [2]}}}
    assert ceiling.ceiling_warnings(parse_campaign(low)) == []
