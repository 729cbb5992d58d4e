"""A request log's own content stays out of the outputs: replayed against the calibration server
(an instrument), the kept bodies hold each message's digest and length instead of its text, the
records hold each reply's length but not its text, the prompt digests still compare two arms, and
a replay of such a run is refused with the way to re-send it."""
import json

import pytest
import yaml
from stackbook.config.loading import parse_campaign
from stackbook.config.protocol import Protocol
from stackbook.evidence.rundir import RunDir
from stackbook.loadgen.drivers import Target, run_open_loop
from stackbook.loadgen.records import RecordWriter, read_records
from stackbook.measure.replay import replay_arm
from stackbook.loadgen.sent import SentWriter, point_digests, read_sent
from stackbook.loadgen.sent_content import content_digest, is_redacted, redacted
from stackbook.loadgen.workload import ApproximateTokenizer, recorded_prompts
from stackbook.locations import REPO_ROOT
from stackbook.measure import point_meter

LOG = REPO_ROOT / "campaigns" / "traces" / "example-openai.jsonl"
TOK = ApproximateTokenizer()


@pytest.fixture(scope="module")
def server(start_module_calibration_server):
    return start_module_calibration_server()


def log_protocol(**arrival) -> Protocol:
    return Protocol(arrival={"kind": "trace", "path": str(LOG), "format": "openai", **arrival},
                    workload={"kind": "synthetic", "prompt_tokens": 32, "output_tokens": 8}, context_length=2048)


def test_a_log_replays_its_own_messages_each_reply_at_its_recorded_length():
    p = log_protocol()
    [level] = p.arrival.load_levels()
    prompts, plan = point_meter.point_requests(p, level, 12, seed=0, tokenizer=TOK, sentinels=[])
    trace = p.arrival.trace()
    assert [list(r.messages) for r in trace.requests] == [pr.messages for pr in prompts]
    assert [pr.output_tokens for pr in prompts] == [r.output_tokens for r in trace.requests]
    assert plan.schedule == [r.timestamp_s for r in trace.requests]
    assert p.arrival.content_is_private() and not log_protocol(keep_content=True).arrival.content_is_private()
    # The passport records the log by its digest, and whether its content was kept.
    from stackbook.evidence.files import file_sha256
    assert p.arrival.evidence() == {"trace_sha256": file_sha256(LOG), "trace_requests": 12, "left_out": {},
                                    "rows_read": 12,
                                    "content": "not kept: bodies as digests and lengths, replies as lengths"}


def test_an_untimed_format_needs_a_rate_and_a_timed_one_refuses_it():
    from pydantic import ValidationError
    chats = str(REPO_ROOT / "campaigns" / "traces" / "example-sharegpt.json")
    with pytest.raises(ValidationError, match="format 'sharegpt' records no arrival times: give rate"):
        Protocol(arrival={"kind": "trace", "path": chats, "format": "sharegpt"})
    with pytest.raises(ValidationError, match="format 'openai' records its own arrival times: remove rate"):
        log_protocol(rate=2)
    p = Protocol(arrival={"kind": "trace", "path": chats, "format": "sharegpt", "rate": 4})
    assert p.arrival.schedule(p.arrival.load_levels()[0], 3, seed=0) == [0.0, 0.25, 0.5]


def test_a_private_logs_outputs_hold_digests_and_lengths_not_its_text(tmp_path, server):
    trace = log_protocol().arrival.trace()
    prompts = recorded_prompts([list(r.messages) for r in trace.requests[:4]], [6, 5, 4, 6], TOK)
    run = RunDir(tmp_path / "outputs" / "t" / "orig").create()
    campaign = parse_campaign({"name": "t", "arms": [{"name": "cal", "engine": {"kind": "llama_cpp"}}]})
    run.campaign_resolved.write_text(yaml.safe_dump(campaign.model_dump(mode="json")))
    arm = run.arm("cal").create()
    with RecordWriter(arm.requests) as w, SentWriter(arm.requests_sent) as sw:
        t = Target(server.base_url, "calibration", {"temperature": 0}, {"max_tokens": 4},
                   length_for=lambda n: {"max_tokens": n, "ignore_eos": True}, on_send=sw.write, private=True)
        run_open_loop(t, prompts, TOK, schedule=[0.0, 0.05, 0.1, 0.15], warmup=0, writer=w,
                      base={"run_id": "orig", "arm": "cal", "point": "trace-r0", "concurrency": 0})
    kept = (arm.path / "requests.jsonl").read_text() + json.dumps([s.body for s in read_sent(arm.requests_sent)])
    for r in trace.requests[:4]:
        for m in r.messages:
            assert m["content"] not in kept, "a logged message's text reached the outputs"
    sent = sorted(read_sent(arm.requests_sent), key=lambda s: s.request_index)
    first = sent[0].body["messages"][0]
    assert first == {"role": "system", "content_sha256": content_digest(trace.requests[0].messages[0]["content"]),
                     "content_chars": len(trace.requests[0].messages[0]["content"])}
    assert all(is_redacted(s.body) for s in sent)
    recs = read_records(arm.requests)
    assert len(recs) == 4 and all(r.ok and r.output_text == "" for r in recs)
    assert sorted(r.output_tokens_server for r in recs) == [4, 5, 6, 6]
    # Two arms sent the same log compare equal by their digests, as with full bodies.
    digests = point_digests(sent)["trace-r0"]
    assert digests["prompts_sha256"] == point_digests(read_sent(arm.requests_sent))["trace-r0"]["prompts_sha256"]
    with pytest.raises(ValueError, match="kept a private request log's prompts as digests"):
        replay_arm(run.path, "cal", endpoint=server.base_url)


def test_redaction_keeps_everything_but_the_text():
    body = {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    out = redacted(body)
    assert out["model"] == "m" and out["max_tokens"] == 4 and "content" not in out["messages"][0]
    assert out["messages"][0]["content_sha256"] == content_digest([{"type": "text", "text": "hi"}])
    assert not is_redacted(body) and is_redacted(out)


def test_a_session_over_the_context_is_refused_by_name_or_left_out_whole():
    """At a 300-token context, one agent session has a step too long (agent-2's third step, 329
    approximate tokens with its reply). Refused, the error names it; with fit: drop that session
    goes, whole, and the passport counts it; sessions: 1 keeps only the first."""
    from pydantic import ValidationError
    with pytest.raises(ValidationError, match=r"the trace's agent-2 \(row 10\) needs 329 tokens, prompt and reply, but "
                                              r"context_length is 300; raise context_length, or set arrival.fit: drop"):
        Protocol(arrival={"kind": "trace", "path": str(LOG), "format": "openai"}, context_length=300)
    p = Protocol(arrival={"kind": "trace", "path": str(LOG), "format": "openai", "fit": "drop"}, context_length=300)
    kept = p.arrival.trace().requests
    assert {r.session for r in kept} == {"agent-0", "agent-1", "agent-3"} and len(kept) == 9
    assert kept[0].timestamp_s == 0 and [r.turn for r in kept if r.session == "agent-1"] == [0, 1, 2]
    evidence = p.arrival.evidence()
    assert evidence["left_out"] == {"sessions with a request over the context (300 tokens)": 1}
    assert (evidence["rows_read"], evidence["trace_requests"]) == (12, 9)
    one = Protocol(arrival={"kind": "trace", "path": str(LOG), "format": "openai", "sessions": 1}, context_length=2048)
    assert {r.session for r in one.arrival.trace().requests} == {"agent-0"}
    assert one.arrival.evidence()["left_out"] == {"sessions beyond the first 1": 3}
