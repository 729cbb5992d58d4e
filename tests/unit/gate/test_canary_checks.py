"""Each canary check asks in its own way and judges its own reply: what the request carries and
the verdict on canned replies, without an engine."""
import json
from pathlib import Path

import pytest
from pydantic import TypeAdapter
from stackbook.gate import canaries
from stackbook.gate.canaries import Check, load_suite, run_check
from stackbook.gate.verdict import failure_class, verdict
from stackbook.loadgen.drivers import Target

TARGET = Target("http://engine", "m", {"temperature": 0.7}, {"max_tokens": 99})


def check(**kw):
    return TypeAdapter(Check).validate_python({"id": "c", **kw})


def reply(content=None, **message):
    return {"choices": [{"message": {"content": content, **message}, "finish_reason": "stop"}]}


@pytest.fixture
def engine(monkeypatch):
    """Answers each chat request with the next canned reply and keeps what was asked."""
    asked, replies = [], []

    def chat_once(target, messages, timeout_s=120.0, **extra):
        asked.append({"messages": messages, "sampling": target.sampling, "length": target.length_fields, **extra})
        return replies.pop(0) if len(replies) > 1 else replies[0]
    monkeypatch.setattr(canaries, "chat_once", chat_once)
    return asked, replies


@pytest.mark.parametrize("spec, text, passed, detail", [
    ({"kind": "contains", "prompt": "p", "expect": ["Paris"]}, "It is paris.", True, "all expected text present"),
    ({"kind": "contains", "prompt": "p", "expect": ["Paris"], "case_sensitive": True}, "paris", False,
     "missing ['Paris']"),
    ({"kind": "regex", "prompt": "p", "pattern": "(?<![0-9])4(?![0-9])"}, "2+2 = 4", True,
     "pattern '(?<![0-9])4(?![0-9])' found"),
    ({"kind": "exact", "prompt": "p", "reference": "Paris."}, "Paris!", False, "differs from reference 'Paris.'"),
    ({"kind": "multi_turn", "prompt": "And my name?", "expect": ["Ada"],
      "history": [{"role": "user", "content": "I am Ada."}, {"role": "assistant", "content": "Hi Ada."}]},
     "You are Ada.", True, "the earlier turn was used"),
    ({"kind": "coding", "prompt": "p", "tests": "assert add(2, 3) == 5"},
     "```python\ndef add(a, b):\n    return a + b\n```", True, "the asserts passed"),
    ({"kind": "coding", "prompt": "p", "tests": "assert add(2, 3) == 5"},
     "```python\ndef add(a, b):\n    return a - b\n```", False, "exit 1: AssertionError"),
])
def test_single_reply_checks_judge_their_reply(engine, spec, text, passed, detail):
    asked, replies = engine
    replies.append(reply(text))
    result = run_check(TARGET, check(**spec))
    assert (result["passed"], result["detail"], result["output"]) == (passed, detail, text)
    assert result["finish_reason"] == "stop" and result["kind"] == spec["kind"]
    assert 0 <= result["seconds"] < 60   # each check's own time, for where the gate's time goes
    assert asked[0]["sampling"]["temperature"] == 0.0 and asked[0]["length"] == {"max_tokens": 32}
    if spec["kind"] == "multi_turn":
        assert [m["content"] for m in asked[0]["messages"]] == ["I am Ada.", "Hi Ada.", "And my name?"]


def test_json_schema_asks_for_the_schema_and_validates(engine):
    asked, replies = engine
    c = check(kind="json_schema", prompt="p", schema={"type": "object", "required": ["age"],
                                                       "properties": {"age": {"type": "integer"}}})
    replies.append(reply('{"age": "thirty"}'))
    result = run_check(TARGET, c)
    assert asked[0]["response_format"]["json_schema"] == {"name": "c", "schema": c.schema_, "strict": True}
    assert result["passed"] is False and result["error_class"] == "schema_failure"
    assert result["detail"] == "schema violation: 'thirty' is not of type 'integer'"


def test_tool_call_is_forced_and_its_arguments_checked(engine):
    asked, replies = engine
    tool = {"type": "function", "function": {"name": "weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    c = check(kind="tool_call", prompt="Weather in Oslo?", tool=tool, expect_arguments={"city": "oslo"})
    call = {"function": {"name": "weather", "arguments": json.dumps({"city": "Oslo"})}}
    replies.append(reply(None, tool_calls=[call]))
    result = run_check(TARGET, c)
    assert asked[0]["tool_choice"] == {"type": "function", "function": {"name": "weather"}}
    assert result["passed"] is True and result["error_class"] is None
    assert result["detail"] == "called weather({'city': 'Oslo'})"
    replies[0] = reply("It is sunny.")
    assert run_check(TARGET, c)["detail"] == "no tool call in the reply"


def test_determinism_counts_distinct_replies(engine):
    _, replies = engine
    replies.extend([reply("a"), reply("a"), reply("b")])
    result = run_check(TARGET, check(kind="determinism", prompt="p", repeats=3, concurrent=False))
    assert result["passed"] is False and result["detail"] == "3 greedy replies (3 sequential), 2 distinct"


def test_needle_tries_every_length_and_depth(engine):
    asked, replies = engine
    replies.append(reply("The code is 4711."))
    c = check(kind="needle", needle="The code is 4711.", question="What is the code?", expect="4711",
              lengths_tokens=[64], depths=[0.0, 1.0], up_to_context=False)
    result = run_check(TARGET, c)
    assert len(asked) == 2 and result["passed"] is True
    assert result["detail"] == "2/2 needles found, longest prompt 64 tokens"


def test_no_reply_is_a_transport_failure_and_gates_every_arm_alike(engine):
    _, replies = engine
    replies.append({"error": "ConnectError: refused", "error_class": "transport"})
    c = check(kind="contains", prompt="p", expect=["x"])
    result = run_check(TARGET, c)
    assert (result["passed"], result["error_class"], result["out_of_scope"]) == (False, "transport", None)
    v = verdict([result])
    assert v["verdict"] == "HOLD"
    assert v["reason"] == ("every canary request was refused (transport: ConnectError: refused): "
                           "the endpoint answered no check")


def test_an_endpoint_refusing_every_request_holds_with_the_reason(engine):
    """An endpoint that answers 400 to each canary: HOLD, and the verdict says it refused."""
    _, replies = engine
    replies.append({"error": "HTTP 400: bad request", "error_class": "http_error"})
    suite, _ = load_suite("embedded-smollm2")
    v = verdict(canaries.run_suite(TARGET, suite, context_length=512))
    assert v["verdict"] == "HOLD" and v["passed"] == 0 and v["gating_checks"] == len(suite.checks)
    assert v["reason"].startswith("every canary request was refused (http_error: HTTP 400: bad request)")


def test_the_gate_is_the_campaigns_and_out_of_scope_checks_do_not_gate(engine):
    _, replies = engine
    replies.append(reply("no idea"))
    suite = canaries.Suite.model_validate({"suite": "s", "version": 1, "checks": [
        {"id": "paris", "kind": "contains", "prompt": "p", "expect": ["no idea"]},
        {"id": "weather", "kind": "tool_call", "prompt": "p",
         "tool": {"type": "function", "function": {"name": "w", "parameters": {"type": "object"}}}},
        {"id": "echo", "kind": "contains", "prompt": "p", "expect": ["yes"], "capability": "instruction_following"},
    ]})
    held = verdict(canaries.run_suite(TARGET, suite))
    assert (held["verdict"], held["failed"], held["gating_checks"]) == ("HOLD", ["weather", "echo"], 3)
    assert held["reason"] == "2 of 3 gating checks failed: weather, echo"
    scoped = verdict(canaries.run_suite(TARGET, suite, {"tool_calls": "no tools are sent",
                                                        "instruction_following": "replies are not judged"}))
    assert (scoped["verdict"], scoped["gating_checks"], scoped["passed"]) == ("PASS", 1, 1)
    assert scoped["out_of_scope"] == {"weather": "no tools are sent", "echo": "replies are not judged"}
    assert scoped["checks"] == [
        {"id": "paris", "kind": "contains", "capability": "chat", "gating": True, "outcome": "PASS",
         "failure": None},
        {"id": "weather", "kind": "tool_call", "capability": "tool_calls", "gating": False,
         "outcome": "FAIL (out of scope)", "failure": "schema_or_tool_failure"},
        {"id": "echo", "kind": "contains", "capability": "instruction_following", "gating": False,
         "outcome": "FAIL (out of scope)", "failure": "completed_but_wrong"}]
    assert held["counts"]["gating"] == {"checks": 3, "failed": 2, "admission_rejected": 0, "length_truncated": 0,
                                             "schema_or_tool_failure": 1, "completed_but_wrong": 1, "request_failed": 0}
    assert scoped["counts"]["gating"]["failed"] == 0
    assert (scoped["counts"]["out_of_scope"]["schema_or_tool_failure"],
            scoped["counts"]["out_of_scope"]["completed_but_wrong"]) == (1, 1)
    with pytest.raises(ValueError, match=r"\['tools'\] is not a capability of suite 's'; its capabilities are "
                                         r"\['chat', 'instruction_following', 'tool_calls'\]"):
        canaries.run_suite(TARGET, suite, {"tools": "typo"})


def test_the_embedded_suite_names_no_engine():
    """No per-engine exceptions: every check of the shipped suite gates every arm alike."""
    text = (canaries.DATA / "canaries-embedded-smollm2.yaml").read_text()
    assert "expected_failure:" not in text
    suite, _ = load_suite("embedded-smollm2")
    assert {c.scope for c in suite.checks} == {"chat", "json_schema", "determinism", "batch_invariance",
                                               "instruction_following", "coding", "long_context", "tool_calls",
                                               "multi_turn"}


def test_the_embedded_suite_loads_every_check_kind():
    suite, digest = load_suite("embedded-smollm2")
    assert len(digest) == 64 and all(hasattr(c, "run") for c in suite.checks)


def test_needle_sits_at_its_depth():
    c = check(kind="needle", needle="NEEDLE.", question="Q?", expect="x", filler="f.")
    assert c.prompt_at(64, 0.0) == "Document:\nNEEDLE. " + " ".join(["f."] * 4) + "\n\nQuestion: Q?"
    assert c.prompt_at(64, 1.0).endswith("f. NEEDLE.\n\nQuestion: Q?")


def test_canaries_ask_greedily_in_the_engines_own_dialect(engine):
    asked, replies = engine
    replies.append(reply("Paris"))
    with_seed = Target("http://engine", "m", {"temperature": 0.7, "top_p": 0.9, "seed": 5}, {"max_tokens": 9})
    without_seed = Target("http://engine", "m", {"temperature": 0.7, "top_p": 0.9}, {"max_tokens": 9})
    run_check(with_seed, check(kind="contains", prompt="capital?", expect=["Paris"]))
    run_check(without_seed, check(kind="contains", prompt="capital?", expect=["Paris"]))
    assert asked[0]["sampling"] == {"temperature": 0.0, "top_p": 1.0, "seed": 0}
    assert asked[1]["sampling"] == {"temperature": 0.0, "top_p": 1.0}  # no seed where the adapter sends none


REAL = Path(__file__).parents[1] / "data" / "quickstart-reference-llama-cpp-canary-results.json"


def test_every_check_of_a_real_arm_is_counted_gating_and_out_of_scope_apart():
    """The quickstart reference llama-cpp canaries (copied from the committed run): the gate
    passed, and the four out-of-scope checks that failed are counted by cause, the tool check among
    them (llama-server wrote text to its bound instead of calling the named tool)."""
    v = verdict(json.loads(REAL.read_text()))
    assert v["verdict"] == "PASS"
    assert v["counts"]["gating"] == {"checks": 7, "failed": 0, "admission_rejected": 0, "length_truncated": 0,
                                     "schema_or_tool_failure": 0, "completed_but_wrong": 0, "request_failed": 0}
    assert v["counts"]["out_of_scope"] == {"checks": 4, "failed": 4, "admission_rejected": 0, "length_truncated": 0,
                                           "schema_or_tool_failure": 1, "completed_but_wrong": 3,
                                           "request_failed": 0}
    assert {c["id"]: c["failure"] for c in v["checks"] if c["failure"]}["tool-call-weather"] == "schema_or_tool_failure"


def test_each_failure_has_one_class():
    base = {"passed": False, "error_class": None, "finish_reason": "stop"}
    assert failure_class(base | {"passed": True}) is None
    assert failure_class(base | {"error_class": "admission_rejected"}) == "admission_rejected"
    assert failure_class(base | {"finish_reason": "length"}) == "length_truncated"
    assert failure_class(base | {"error_class": "schema_failure", "finish_reason": "length"}) == \
        "schema_or_tool_failure"
    assert failure_class(base | {"error_class": "timeout"}) == "request_failed"
    assert failure_class(base) == "completed_but_wrong"


def test_a_json_reply_cut_at_its_bound_is_truncation():
    c = check(kind="json_schema", prompt="p", schema={"type": "object"})
    cut = c.judge('{"name": "Ad', {"choices": [{"finish_reason": "length"}]})
    assert (cut["passed"], cut["error_class"]) == (False, "length_truncated")
    assert c.judge('{"name": "Ad', {"choices": [{"finish_reason": "stop"}]})["error_class"] == "schema_failure"
