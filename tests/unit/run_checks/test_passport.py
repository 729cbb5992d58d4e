"""The passport's label comes from the one rule, whatever the arm went through."""
import json

import pytest
from pydantic import ValidationError
from stackbook.config.loading import parse_campaign
from stackbook.evidence.files import read_json, update_results
from stackbook.evidence.manifest import ManifestFile, read_manifest
from stackbook.run_checks.passport import write_passport
from stackbook.evidence.portable import make_portable
from stackbook.evidence.rundir import RunDir
from stackbook.locations import REPO_ROOT

CAMPAIGN = parse_campaign({
    "name": "t", "protocol": {"workload": {"kind": "synthetic", "prompt_tokens": 64, "output_tokens": 16}},
    "arms": [{"name": "a", "engine": {"kind": "llama_cpp"}}]})
REF = read_json(RunDir("outputs/quickstart/reference").arm("llama-cpp").results)


def arm_with(tmp_path, **sections):
    arm = RunDir(tmp_path).arm("a").create()
    for name, data in sections.items():
        update_results(arm, name, data)
    return arm


def test_a_sweep_without_canaries_is_not_gated_in_the_passport(tmp_path):
    arm = arm_with(tmp_path, sweep=REF["sweep"])
    p = write_passport(CAMPAIGN, CAMPAIGN.arms[0], arm)
    assert p.results.label == "not gated"
    on_disk = json.loads(arm.passport_json.read_text())
    assert on_disk["results"]["label"] == "not gated"
    assert on_disk["results"]["raw"] == {"requests": "requests.jsonl", "engine_log": "engine.log"}
    assert on_disk["validity"]["canaries"] == {"unknown": "the canary notebook did not run"}
    assert "Label: **not gated**" in arm.passport_md.read_text()


def test_accepted_then_engine_died(tmp_path):
    arm = arm_with(tmp_path, canaries=REF["canaries"], sweep=REF["sweep"])
    assert write_passport(CAMPAIGN, CAMPAIGN.arms[0], arm).results.label == "accepted"
    assert write_passport(CAMPAIGN, CAMPAIGN.arms[0], arm, engine_died=True).results.label == "engine died"


def test_every_point_discarded(tmp_path):
    sweep = json.loads(json.dumps(REF["sweep"]))
    for s in sweep["points"].values():
        s["discarded"] = True
    arm = arm_with(tmp_path, canaries=REF["canaries"], sweep=sweep)
    assert write_passport(CAMPAIGN, CAMPAIGN.arms[0], arm).results.label == "discarded"


def test_no_sweep_still_says_why(tmp_path):
    held = {**REF["canaries"], "verdict": "HOLD", "failed": ["capital-of-france"],
            "reason": "1 of 7 gating checks failed: capital-of-france"}
    arm = arm_with(tmp_path, canaries=held)
    write_passport(CAMPAIGN, CAMPAIGN.arms[0], arm)
    res = read_json(arm.passport_json)["results"]
    assert res == {"label": "HOLD", "unknown": "the load sweep did not run (canaries HOLD: 1 of 7 gating checks "
                                               "failed: capital-of-france)"}
    md = arm.passport_md.read_text()
    assert "Label: **HOLD**." in md and "*not known: the load sweep did not run (canaries HOLD: 1 of 7 gating" in md


def test_manifest_is_validated_on_save(tmp_path):
    run = RunDir(tmp_path)
    m = ManifestFile(run, CAMPAIGN, "campaigns/t.yaml")
    m.arm("a")["notebooks"]["10_sizing"] = {"status": "ok", "seconds": 1.5, "sha256": "ab"}
    m.save()
    assert read_manifest(run).arms["a"].notebooks["10_sizing"].seconds == 1.5
    m.arm("a")["status"] = "finished"
    with pytest.raises(ValidationError, match=r"arms\.a\.status"):
        m.save()
    assert read_manifest(run).arms["a"].status == "pending"  # the file kept the last valid state


def test_make_portable_rewrites_paths_and_secrets(tmp_path):
    run = RunDir(tmp_path)
    arm = run.arm("a").create()
    arm.engine_log.write_text(f"loaded {REPO_ROOT}/models/x with key sk-123\n")
    arm.requests.write_text('{"ok": true}\n')
    assert make_portable(run, ["sk-123"]) == []
    assert arm.engine_log.read_text() == "loaded models/x with key [REDACTED]\n"
