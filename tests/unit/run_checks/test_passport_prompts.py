"""The passport's protocol part says where the exact bodies are kept, with their digests per point."""
from stackbook.config.loading import parse_campaign
from stackbook.evidence.files import read_json, update_results
from stackbook.run_checks.passport import write_passport
from stackbook.evidence.rundir import RunDir

CAMPAIGN = parse_campaign({
    "name": "t", "protocol": {"workload": {"kind": "synthetic", "prompt_tokens": 64, "output_tokens": 16}},
    "arms": [{"name": "a", "engine": {"kind": "llama_cpp"}}]})


def test_the_digests_of_what_was_sent_are_in_the_passport(tmp_path):
    arm = RunDir(tmp_path).arm("a").create()
    update_results(arm, "sweep", {"points": {"c1-r0": {
        "requests": 2, "completed": 2, "requests_sent": 3, "prompts_sha256": "a" * 64, "bodies_sha256": "b" * 64}}})
    write_passport(CAMPAIGN, CAMPAIGN.arms[0], arm)
    sent = read_json(arm.passport_json)["protocol"]["prompts_sent"]
    assert sent == {"file": "requests_sent.jsonl.gz",
                    "points": {"c1-r0": {"requests_sent": 3, "prompts_sha256": "a" * 64, "bodies_sha256": "b" * 64}}}
    assert "a" * 64 in arm.passport_md.read_text()


def test_a_run_without_kept_bodies_says_so(tmp_path):
    arm = RunDir(tmp_path).arm("a").create()
    update_results(arm, "sweep", {"points": {"c1-r0": {"requests": 2, "completed": 2}}})
    write_passport(CAMPAIGN, CAMPAIGN.arms[0], arm)
    assert read_json(arm.passport_json)["protocol"]["prompts_sent"]["unknown"].startswith("no request bodies")
