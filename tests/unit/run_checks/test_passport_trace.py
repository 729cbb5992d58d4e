"""A replayed trace's passport states what its requests carried: the lengths read from the arm's
records with the trace as their source, and no synthetic workload the campaign left unused. A
synthetic arm's passport keeps its workload as configured."""
from stackbook.config.loading import parse_campaign
from stackbook.evidence.files import read_json, update_results
from stackbook.run_checks.passport import write_passport
from stackbook.evidence.rundir import RunDir
from stackbook.run_checks.sent_workload import length_summary, sent_workload
from stackbook.loadgen.records import RecordWriter
from stackbook.locations import REPO_ROOT

from tests.support.records import request_record

TRACE = {"kind": "trace", "path": str(REPO_ROOT / "campaigns/traces/example-openai.jsonl"), "format": "openai"}


def campaign(arrival: dict | None = None):
    protocol = {"workload": {"kind": "synthetic", "prompt_tokens": 128, "output_tokens": 48}, "context_length": 2048}
    return parse_campaign({"name": "t", "protocol": protocol | ({"arrival": arrival} if arrival else {}),
                           "arms": [{"name": "a", "engine": {"kind": "llama_cpp"}}]})


def sent(i: int, prompt: int, engine: int | None, reply: int, phase: str = "measure"):
    return request_record(point="trace-r0", phase=phase, request_index=i, prompt_tokens_client=prompt,
                          prompt_tokens_server=engine, output_tokens_requested=reply)


def test_a_distribution_is_its_count_ends_and_median():
    assert length_summary([320, 118, 200]) == {"requests": 3, "min": 118, "median": 200, "max": 320}
    assert length_summary([10, 13]) == {"requests": 2, "min": 10, "median": 11.5, "max": 13}
    assert length_summary([]) is None


def test_a_replayed_trace_s_passport_states_the_lengths_sent_not_the_synthetic_workload(tmp_path):
    c = campaign(TRACE)
    arm = RunDir(tmp_path).arm("a").create()
    with RecordWriter(arm.requests) as w:
        for r in (sent(0, 118, 131, 13), sent(1, 209, 231, 24), sent(2, 320, 351, 32),
                  sent(3, 12, 40, 16, phase="sentinel")):
            w.write(r)
    update_results(arm, "sweep", {"points": {"trace-r0": {"requests": 3, "completed": 3}}})
    write_passport(c, c.arms[0], arm)
    protocol = read_json(arm.passport_json)["protocol"]
    work = protocol["workload"]
    assert work["kind"] == "trace" and "version" not in work
    assert work["source"].startswith(f"the replayed trace {TRACE['path']} (openai format, sha256 ")
    assert work["source"].endswith(protocol["arrival"]["trace_sha256"] + ")")
    assert {k: work["prompt_tokens"][k] for k in ("requests", "min", "median", "max")} == {
        "requests": 3, "min": 118, "median": 209, "max": 320}     # the sentinel's 12 is not the trace's
    assert (work["prompt_tokens_engine"]["min"], work["prompt_tokens_engine"]["max"]) == (131, 351)
    assert (work["output_tokens"]["min"], work["output_tokens"]["median"], work["output_tokens"]["max"]) == (13, 24, 32)
    assert work["sentinels"].startswith("1 known-answer canary prompts")
    assert protocol["prompt_tokens"] == ("the trace's prompts: 118 to 320 (median 209, 3 requests) by the client's "
                                         "count; 131 to 351 (median 231) by the engine's")
    assert protocol["output_budget_tokens"] == "per request, the trace's reply length: 13 to 32 (median 24, 3 requests)"
    assert protocol["requests_per_point"] == 12   # the trace's requests, not the protocol's unused 16
    readable = arm.passport_md.read_text().split("## Protocol")[1].split("## Validity")[0]
    assert "synthetic-v1" not in readable and "118 to 320" in readable


def test_a_trace_arm_that_sent_nothing_says_so_and_an_engine_without_counts_is_named():
    work = sent_workload([], {"path": "t.jsonl", "format": "openai", "trace_sha256": "ab"})
    assert work["unknown"].startswith("no measured request was recorded") and "prompt_tokens" not in work
    work = sent_workload([sent(0, 100, None, 8)], {"path": "t.jsonl", "format": "openai"})
    assert work["prompt_tokens_engine"] == {"unknown": "the engine reported no prompt counts"}
    assert work["source"].endswith("sha256 not recorded)")


def test_a_synthetic_arm_s_passport_keeps_its_configured_workload(tmp_path):
    c = campaign()
    arm = RunDir(tmp_path).arm("a").create()
    write_passport(c, c.arms[0], arm)
    protocol = read_json(arm.passport_json)["protocol"]
    assert protocol["workload"]["kind"] == "synthetic" and protocol["workload"]["version"] == "synthetic-v1"
    assert protocol["workload"]["prompt_tokens"] == {"kind": "fixed", "tokens": 128}
    assert (protocol["prompt_tokens"], protocol["output_budget_tokens"]) == ("128", "48")
