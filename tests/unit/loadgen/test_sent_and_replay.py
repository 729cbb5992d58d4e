"""What was sent is kept (gzip JSONL, one body per request, with its send offset) and replays
exactly: the same bodies, on the same schedule, against the calibration server (an instrument)."""
import gzip
import json

import pytest
import yaml
from stackbook.config.loading import parse_campaign
from stackbook.evidence.rundir import RunDir
from stackbook.loadgen import arrivals
from stackbook.loadgen.drivers import Target, request_body, run_closed_loop, run_open_loop
from stackbook.loadgen.records import RecordWriter, read_records
from stackbook.measure.replay import replay_arm, target_for
from stackbook.loadgen.sent import SentWriter, decoding_sent, point_digests, prompt_of, read_sent
from stackbook.loadgen.workload import ApproximateTokenizer, PromptSpec

TOK = ApproximateTokenizer()


@pytest.fixture(scope="module")
def server(start_module_calibration_server):
    return start_module_calibration_server()


def prompts(n, word="x"):
    return [PromptSpec(i, [{"role": "user", "content": f"{word} {i}"}], 2, output_tokens=4 + i % 3) for i in range(n)]


def recorded_run(tmp_path, server, word="x") -> RunDir:
    """A run directory whose arm 'cal' sent an open-loop point and a closed-loop point."""
    run = RunDir(tmp_path / "outputs" / "t" / "orig").create()
    campaign = parse_campaign({"name": "t", "arms": [{"name": "cal", "engine": {"kind": "llama_cpp"}}]})
    run.campaign_resolved.write_text(yaml.safe_dump(campaign.model_dump(mode="json")))
    arm = run.arm("cal").create()
    with RecordWriter(arm.requests) as w, SentWriter(arm.requests_sent) as sw:
        t = Target(server.base_url, "calibration", {"temperature": 0, "seed": 0}, {"max_tokens": 4},
                   length_for=lambda n: {"max_tokens": n, "ignore_eos": True}, on_send=sw.write)
        run_open_loop(t, prompts(6, word), TOK, schedule=arrivals.constant_schedule(20.0, 6), warmup=1, writer=w,
                      base={"run_id": "orig", "arm": "cal", "point": "rate20-r0", "concurrency": 0})
        run_closed_loop(t, prompts(5, word), TOK, concurrency=2, warmup=1, writer=w,
                        base={"run_id": "orig", "arm": "cal", "point": "c2-r0", "concurrency": 2})
    return run


def test_every_body_is_kept_compressed_with_its_point_phase_and_send_offset(tmp_path, server):
    run = recorded_run(tmp_path, server)
    path = run.arm("cal").requests_sent
    assert path.name == "requests_sent.jsonl.gz" and gzip.open(path).read()  # really gzip
    sent = read_sent(path)
    assert len(sent) == 11
    rate = sorted((s for s in sent if s.point == "rate20-r0"), key=lambda s: s.request_index)
    assert [s.phase for s in rate] == ["warmup"] + ["measure"] * 5
    assert [s.scheduled_s for s in rate] == arrivals.constant_schedule(20.0, 6)
    assert all(s.sent_s >= s.scheduled_s for s in rate)
    assert rate[2].body["messages"] == [{"role": "user", "content": "x 2"}]
    assert rate[2].body["max_tokens"] == 6 and rate[2].body["ignore_eos"] is True
    assert decoding_sent(rate[2].body) == {"temperature": 0}  # greedy: the seed decides nothing


def test_a_crash_cut_tail_is_dropped_and_the_rest_read(tmp_path):
    path = tmp_path / "s.jsonl.gz"
    with SentWriter(path) as w:
        for i in range(3):
            w.write({"point": "p", "phase": "measure", "request_index": i, "scheduled_s": 0, "sent_s": 0,
                     "body": {"messages": [{"role": "user", "content": str(i)}]}})
    data = path.read_bytes()
    path.write_bytes(data[:-8])  # the gzip trailer lost, as after a kill
    assert [s.request_index for s in read_sent(path)] == [0, 1, 2]
    with SentWriter(path) as w:  # a resumed run appends after the cut
        w.write({"point": "p", "attempt": 1, "phase": "measure", "request_index": 0, "scheduled_s": 0, "sent_s": 0,
                 "body": {"messages": []}})
    assert [(s.attempt, s.request_index) for s in read_sent(path)] == [(0, 0), (0, 1), (0, 2), (1, 0)]
    assert [s.attempt for s in read_sent(path, latest_attempt=True)] == [1]


def test_prompt_digests_ignore_the_engine_dialect_and_the_model_replies():
    def sent(i, body):
        return {"point": "p", "phase": "measure", "request_index": i, "scheduled_s": 0, "sent_s": 0, "body": body}
    from stackbook.loadgen.sent import SentRequest
    msgs = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "reply"},
            {"role": "user", "content": "b"}]
    llama = [SentRequest(**sent(0, {"model": "m.gguf", "messages": msgs, "max_tokens": 8, "ignore_eos": True,
                                    "repeat_penalty": 1.0, "temperature": 0}))]
    vllm = [SentRequest(**sent(0, {"model": "m", "messages": msgs[:1] + [{"role": "assistant", "content": "other"}]
                                   + msgs[2:], "max_tokens": 8, "min_tokens": 8, "repetition_penalty": 1.0,
                                   "temperature": 0}))]
    a, b = point_digests(llama)["p"], point_digests(vllm)["p"]
    assert a["prompts_sha256"] == b["prompts_sha256"] and a["bodies_sha256"] != b["bodies_sha256"]
    assert a["decoding_sent"] == b["decoding_sent"] == [{"temperature": 0}]  # no penalty: neutral
    other = [SentRequest(**sent(0, {**llama[0].body, "messages": [{"role": "user", "content": "z"}]}))]
    assert point_digests(other)["p"]["prompts_sha256"] != a["prompts_sha256"]
    longer = [SentRequest(**sent(0, {**llama[0].body, "max_tokens": 9}))]  # a different requested length
    assert point_digests(longer)["p"]["prompts_sha256"] != a["prompts_sha256"]


def test_decoding_sent_keeps_what_shapes_the_output():
    greedy_hosted = {"temperature": 0, "max_completion_tokens": 8}
    greedy_local = {"temperature": 0, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "repeat_penalty": 1.0, "seed": 0}
    assert decoding_sent(greedy_hosted) == decoding_sent(greedy_local) == {"temperature": 0}
    assert decoding_sent({**greedy_local, "repeat_penalty": 1.1}) == {"temperature": 0, "repetition_penalty": 1.1}
    sampled = {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "seed": 0}
    assert decoding_sent(sampled) == sampled  # sampling: every knob counts, an unsent one is a difference


def test_a_dialect_that_nests_its_knobs_in_generation_config_sends_the_same_decoding_and_prompts():
    """transformers serve takes its sampling knobs and its exact length inside generation_config:
    the knobs count as sent, and the field is the engine's dialect, not the prompt, so an arm that
    sends it compares equal with one that sends top-level fields."""
    messages = [{"role": "user", "content": "hi"}]
    top_level = {"model": "a", "messages": messages, "temperature": 0.7, "top_p": 0.8, "top_k": 20, "seed": 0,
                 "max_tokens": 9, "ignore_eos": True}
    nested = {"model": "b", "messages": messages, "temperature": 0.7, "top_p": 0.8, "seed": 0, "max_tokens": 9,
              "generation_config": json.dumps({"top_k": 20, "do_sample": True, "eos_token_id": -1,
                                               "max_new_tokens": 9})}
    assert decoding_sent(nested) == decoding_sent(top_level) == {"temperature": 0.7, "top_p": 0.8, "top_k": 20,
                                                                 "seed": 0}
    assert prompt_of(nested) == prompt_of(top_level) == {"messages": messages, "max_tokens": 9}


@pytest.mark.parametrize("body", [
    {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True, "temperature": 0, "seed": 0,
     "max_tokens": 9, "ignore_eos": True, "stream_options": {"include_usage": True}},
    {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True, "temperature": 0.7,
     "max_tokens": 30, "response_format": {"type": "json_schema", "json_schema": {
         "name": "answer", "schema": {"type": "object"}, "strict": True}}, "stream_options": {"include_usage": True}},
])
def test_a_recorded_body_is_rebuilt_exactly(body):
    target, prompt = target_for(body, "http://127.0.0.1:1", {}, 5.0)
    assert request_body(target, prompt.messages, output_tokens=prompt.output_tokens, schema=prompt.schema) == body


def test_replay_resends_the_same_bodies_on_the_same_schedule(tmp_path, server):
    run = recorded_run(tmp_path, server)
    replay = replay_arm(run.path, "cal", endpoint=server.base_url)
    assert replay.path.parent == run.path.parent and replay.name.startswith("replay-orig-")
    assert replay.campaign_resolved.read_text() == run.campaign_resolved.read_text()
    result = json.loads(replay.replay.read_text())
    assert result["replay_of"] == str(run.path) and result["arm"] == "cal"
    assert set(result["points"]) == {"rate20-r0", "c2-r0"}
    for p in result["points"].values():
        assert p["identical_bodies"] and p["bodies_sha256"] == p["original_bodies_sha256"] and p["errors"] == 0
    original = {(s.point, s.request_index): s for s in read_sent(run.arm("cal").requests_sent)}
    again = read_sent(replay.arm("cal").requests_sent)
    assert len(again) == 11
    for s in again:
        o = original[(s.point, s.request_index)]
        assert s.body == o.body and s.phase == o.phase and s.scheduled_s == o.sent_s
        assert o.sent_s <= s.sent_s < o.sent_s + 0.25  # on the recorded offsets, never early
    recs = read_records(replay.arm("cal").requests)
    assert len(recs) == 11 and all(r.ok and r.run_id == replay.name for r in recs)
    assert sorted(r.output_tokens_server for r in recs if r.point == "rate20-r0") == [4, 4, 5, 5, 6, 6]


def test_replay_of_one_point_and_the_errors_it_names(tmp_path, server):
    run = recorded_run(tmp_path, server)
    replay = replay_arm(run.path, "cal", points=["c2-r0"], endpoint=server.base_url, run_id="again")
    assert replay.name == "again" and set(json.loads(replay.replay.read_text())["points"]) == {"c2-r0"}
    with pytest.raises(ValueError,
                       match=r"--point rate9-r0: not recorded for arm 'cal'; recorded points: c2-r0, rate20-r0"):
        replay_arm(run.path, "cal", points=["rate9-r0"], endpoint=server.base_url)
    with pytest.raises(FileExistsError, match="already exists"):
        replay_arm(run.path, "cal", endpoint=server.base_url, run_id="again")
    with pytest.raises(FileNotFoundError, match="no recorded bodies for arm 'nope'"):
        replay_arm(run.path, "nope", endpoint=server.base_url)


def test_the_replay_command(tmp_path, server):
    from stackbook.cli import app
    from typer.testing import CliRunner
    run = recorded_run(tmp_path, server)
    out = CliRunner().invoke(app, ["replay", str(run.path), "--arm", "cal", "--point", "c2-r0",
                                   "--endpoint", server.base_url, "--run-id", "r2"])
    assert out.exit_code == 0, out.output
    assert f"replay: {run.path.parent / 'r2'}" in out.output
    assert "c2-r0: 5 requests, 0 errors, bodies identical" in out.output
    bad = CliRunner().invoke(app, ["replay", str(run.path), "--arm", "nope", "--endpoint", server.base_url])
    assert bad.exit_code == 2 and "no arm named 'nope'" in bad.output


def test_a_replay_uses_the_endpoints_route(tmp_path, server):
    """A hosted API's chat path (base path and query kept) is where the replay sends."""
    target, _ = target_for({"model": "m", "messages": [], "max_completion_tokens": 8}, server.base_url, {}, 5.0,
                           route={"chat_path": "/openai/v1/chat/completions?api-version=1", "ca_bundle": None})
    assert target.chat_path == "/openai/v1/chat/completions?api-version=1"
    assert request_body(target, [])["max_completion_tokens"] == 8 and "max_tokens" not in request_body(target, [])


def test_an_engines_per_request_cache_switch_is_not_part_of_the_prompt():
    """llama-server's cold arms carry cache_prompt: false; the prompt digest, which the fairness
    check compares across engines, must not see it."""
    from stackbook.loadgen.sent import prompt_of

    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.0, "max_tokens": 8}
    assert prompt_of(body | {"cache_prompt": False, "repeat_penalty": 1.0}) == prompt_of(
        body | {"min_tokens": 8, "repetition_penalty": 1.0})
    assert prompt_of(body | {"response_format": {"type": "json_object"}}) != prompt_of(body)
