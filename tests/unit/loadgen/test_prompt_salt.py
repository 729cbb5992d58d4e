"""The cache salt: unique per arm, point and attempt, left out of the prompt digest, never on a
sentinel, refused under a warm protocol."""
import pytest
from pydantic import ValidationError

from stackbook.config.protocol import Protocol
from stackbook.loadgen.prompt_salt import SALT, salt_for, salt_point, salted, unsalted
from stackbook.loadgen.sent import prompt_of
from stackbook.loadgen.workload import ApproximateTokenizer, PromptSpec, count_tokens

TOK = ApproximateTokenizer()


def prompts():
    return [PromptSpec(0, [{"role": "user", "content": "alpha beta gamma"}], 3),
            PromptSpec(1, [{"role": "system", "content": "be brief"}, {"role": "user", "content": "delta"}], 1),
            PromptSpec(2, [{"role": "user", "content": "what is 2+2?"}], 5, sentinel="arithmetic")]


def test_each_arm_point_and_attempt_has_its_own_salt_of_one_length():
    salts = {salt_for("run", arm, point, attempt) for arm in ("a", "b") for point in ("c1-r0", "c1-r1")
             for attempt in (0, 1)}
    assert len(salts) == 8 and {len(s) for s in salts} == {len("[salt 0123abcd] ")}
    assert all(SALT.match(s) for s in salts)
    assert salt_for("run", "a", "c1-r0", 0) == salt_for("run", "a", "c1-r0", 0)   # replayable


def test_a_salted_prompt_differs_on_the_wire_and_digests_the_same():
    a = salted(prompts(), salt_for("run", "a", "c1-r0", 0), TOK)
    b = salted(prompts(), salt_for("run", "b", "c1-r0", 0), TOK)
    assert a[0].messages != b[0].messages and a[0].messages[0]["content"].startswith("[salt ")
    assert a[1].messages[0]["content"].startswith("[salt ") and a[1].messages[1] == prompts()[1].messages[1]
    for x, y, orig in zip(a, b, prompts()):
        assert prompt_of({"messages": x.messages}) == prompt_of({"messages": y.messages}) == \
            prompt_of({"messages": orig.messages})
    assert unsalted(a[0].messages) == prompts()[0].messages


def test_the_user_message_is_counted_again_and_a_sentinel_is_sent_as_it_is():
    a = salted(prompts(), salt_for("run", "a", "c1-r0", 0), TOK)
    assert a[0].prompt_tokens_client == count_tokens(TOK, a[0].messages[0]["content"]) > 3
    assert a[1].prompt_tokens_client == 1          # the salt opened the system message
    assert a[2] == prompts()[2]


def test_salting_follows_the_protocol_and_a_warm_protocol_refuses_it():
    same, salt = salt_point(Protocol(), "run", "a", "c1-r0", 0, prompts(), TOK)
    assert same == prompts() and salt is None
    _, salt = salt_point(Protocol(cache_salt=True), "run", "a", "c1-r0", 0, prompts(), TOK)
    assert salt == salt_for("run", "a", "c1-r0", 0).strip()
    with pytest.raises(ValidationError, match="cache_salt keeps arms from each other's cache"):
        Protocol(cache_salt=True, prefix_cache="warm")
