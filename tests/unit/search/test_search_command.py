"""`stackbook search` end to end on the real knee server (a calibration-server process per
configuration, the load generator's closed loop), with a tiny budget: few, short requests. No
timing is asserted: only that the steps are recorded, the report written and the check refuses
nothing it should accept."""
import json

from typer.testing import CliRunner

from stackbook.cli import app

CAMPAIGN = """
name: tiny
system: {kind: knee, concurrency: 4, output_tokens: 4, tpot_ms: 1000, ttft_ms: 5000, requests: 6}
search:
  {budget: {steps: 1, time_s: 300}, knobs: [max_batch, label], incumbent: {max_batch: 2}, rounds: 2, max_rounds: 2}
"""


def test_search_check_then_run_on_the_knee_server(tmp_path):
    campaign = tmp_path / "tiny.yaml"
    campaign.write_text(CAMPAIGN)
    runner = CliRunner()
    checked = runner.invoke(app, ["search", str(campaign), "--check", "--out", str(tmp_path / "out")])
    assert checked.exit_code == 0, checked.output
    assert "valid; nothing run" in checked.output and not (tmp_path / "out").exists()

    bad = tmp_path / "bad.yaml"
    bad.write_text(CAMPAIGN.replace("knobs: [max_batch, label]", "knobs: [slots]"))
    refused = runner.invoke(app, ["search", str(bad), "--check"])
    assert refused.exit_code == 2 and "no knob 'slots' on kind knee" in refused.output

    ran = runner.invoke(app, ["search", str(campaign), "--out", str(tmp_path / "out")])
    assert ran.exit_code == 0, ran.output
    lines = [json.loads(x) for x in (tmp_path / "out" / "search.jsonl").read_text().splitlines()]
    assert [x["kind"] for x in lines] == ["baseline", "control", "candidate", "stop"]
    assert all(len(x["points_after"]) == 2 and all(p["requests"] == 6 for p in x["points_after"]) for x in lines)
    assert lines[1]["control_knob"] == "label" and lines[2]["change"]["changes"].keys() == {"max_batch"}
    assert lines[-1]["stop_reason"] == "step budget spent: 1 of 1 steps"
    report = (tmp_path / "out" / "search.md").read_text()
    assert "## Final configuration against the default" in report and "## Never tried" in report
