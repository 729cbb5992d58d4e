"""How an arm and a run end: a HOLD is never reported as complete."""
from stackbook.arm_run import arm_outcome
from stackbook.evidence.manifest import Manifest
from stackbook.runner import run_outcome


def test_an_arm_whose_canaries_held_is_held_with_the_reason():
    refused = {"canaries": {"verdict": "HOLD", "reason": "every canary request was refused (http_error: HTTP 400)"}}
    assert arm_outcome(refused) == {"status": "held",
                                    "error": "canaries HOLD: every canary request was refused (http_error: HTTP 400)"}
    assert arm_outcome({"canaries": {"verdict": "PASS"}}) == {"status": "complete"}
    assert arm_outcome({}) == {"status": "complete"}  # sizing only, or a sweep run as 'not gated'


def test_a_run_with_a_held_arm_is_not_complete():
    assert run_outcome(["complete", "complete"], True) == "complete"
    assert run_outcome(["complete", "held"], True) == "held"
    assert run_outcome(["complete", "failed"], True) == "incomplete"
    assert run_outcome(["complete"], False) == "incomplete"
    Manifest.model_validate({"campaign": "c", "campaign_file": "c.yaml", "status": "held", "created_unix": 0,
                             "arms": {"a": {"status": "held", "error": "canaries HOLD: ..."}}})
