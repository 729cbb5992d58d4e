"""`stackbook schema`: the JSON Schema of the campaign file and of each result file."""
import json

import pytest
from typer.testing import CliRunner
from stackbook.cli import app


@pytest.mark.parametrize("kind, title, required", [
    ("campaign", "Campaign", {"name", "arms"}),
    ("results", "ArmResults", set()),
    ("passport", "Passport", {"passport_version", "campaign", "identity", "protocol", "validity", "results"}),
    ("analysis", "CampaignAnalysis", {"campaign", "arms", "fairness", "points", "verdict"}),
    ("manifest", "Manifest", {"campaign", "campaign_file", "status", "created_unix"}),
])
def test_schema_prints_valid_json_schema(kind, title, required):
    out = CliRunner().invoke(app, ["schema", kind])
    assert out.exit_code == 0, out.output
    schema = json.loads(out.stdout)
    assert schema["title"] == title
    assert required <= set(schema.get("required", []))


def test_results_schema_types_the_sections():
    schema = json.loads(CliRunner().invoke(app, ["schema", "results"]).stdout)
    assert set(schema["properties"]) == {"sizing", "canaries", "sweep", "capacity"}
    canaries = schema["$defs"]["CanaryResults"]["properties"]["verdict"]
    assert canaries["enum"] == ["PASS", "HOLD"]
    assert schema["$defs"]["Label"]["enum"] == ["accepted", "HOLD", "not comparable", "discarded", "engine died",
                                                "not measured", "not gated"]


def test_an_unknown_schema_names_the_choices():
    out = CliRunner().invoke(app, ["schema", "passports"])
    assert out.exit_code == 2
    assert "no schema 'passports'; choose one of: campaign, results, passport, analysis, manifest" in out.output
