"""Recomputing a sweep from its records keeps what only the engine said: how it forced the
replies' lengths, or that it could not."""
import json
from pathlib import Path

from stackbook.config.loading import load_campaign
from stackbook.loadgen.records import read_records
from stackbook.measure.refigure import kept_length_control, refigured_sweep

RUN = Path("outputs/routing/reference")


def test_the_engines_length_method_survives_a_recompute():
    campaign = load_campaign(RUN / "campaign.resolved.yaml")
    arm = campaign.arms[0]
    d = RUN / "arms" / arm.name
    sweep = json.loads((d / "results.json").read_text())["sweep"]
    assert sweep["length_control"]["method"].startswith("ignore_eos")
    again = refigured_sweep(sweep, read_records(d / "requests.jsonl", latest_attempt=True),
                            campaign.protocol_for(arm), {"commit": "test"})
    assert again["length_control"]["method"] == sweep["length_control"]["method"]
    assert again["length_control"]["honoured"] is True


def test_an_engine_without_length_control_stays_uncontrolled():
    stored = {"method": "none: this engine offers no way", "controlled": False, "honoured": "not controlled"}
    kept = kept_length_control(stored, {"controlled": True, "honoured": True, "short_replies": 3})
    assert kept == {"method": "none: this engine offers no way", "controlled": False, "honoured": "not controlled",
                    "short_replies": 3}
