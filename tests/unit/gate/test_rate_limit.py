"""The gate waits out a rate limit: Retry-After honoured (seconds or HTTP date), else back-off with
jitter, a bounded number of tries and total wait, every retry recorded in the check's result; a
limit that never lifts fails with a message naming it. Against the calibration server over HTTP."""
import random
from datetime import datetime, timezone
from email.utils import format_datetime

import httpx
import pytest
from pydantic import TypeAdapter
from stackbook.gate import rate_limit
from stackbook.gate.canaries import Check, run_check
from stackbook.gate.probe import _stream_once, exact_length_accepted
from stackbook.gate.rate_limit import Patience, backoff_s, counting, patient, retry_after_s
from stackbook.gate.verdict import failure_class, verdict
from stackbook.loadgen.drivers import Target, chat_once
from stackbook.loadgen.workload import ApproximateTokenizer

SAYS_TOK = {"id": "says-tok", "kind": "contains", "prompt": "Say tok.", "expect": ["tok"], "max_tokens": 4}
QUICK = Patience(tries=5, most_wait_s=5.0, first_backoff_s=0.01, longest_backoff_s=0.04)


def check(spec=SAYS_TOK):
    return TypeAdapter(Check).validate_python(spec)


def target(server, model="calibration"):
    return Target(server.base_url, model, {"temperature": 0.0}, {"max_tokens": 4}, timeout_s=10)


# -- the arithmetic --------------------------------------------------------------------------

def test_retry_after_reads_seconds_and_http_dates():
    now = 1_700_000_000.0
    date = format_datetime(datetime.fromtimestamp(now + 30, timezone.utc), usegmt=True)
    assert retry_after_s("1", now) == 1.0 and retry_after_s("2.5", now) == 2.5
    assert retry_after_s(date, now) == pytest.approx(30.0)
    assert retry_after_s(format_datetime(datetime.fromtimestamp(now - 30, timezone.utc), usegmt=True), now) == 0.0
    assert retry_after_s("-3", now) == 0.0
    assert retry_after_s(None, now) is None and retry_after_s("soon", now) is None and retry_after_s(" ", now) is None


def test_backoff_doubles_to_its_cap_less_up_to_a_quarter():
    p = Patience()
    assert [backoff_s(k, 0.0, p) for k in range(6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert backoff_s(0, 0.999, p) == pytest.approx(0.5 * 0.75, rel=1e-3)
    assert backoff_s(2, 0.5, p) == 2.0 * 0.875


def fake(replies):
    """A send that answers each call with the next reply, and the waits it was asked to sleep."""
    sent, slept = [], []

    def send():
        sent.append(1)
        return replies[min(len(sent), len(replies)) - 1]
    return send, sent, slept


def test_a_503_waits_only_when_it_names_a_wait_and_other_errors_never_wait():
    limited_503 = {"error": "HTTP 503: busy", "error_class": "admission_rejected", "status": 503, "retry_after": "2"}
    ok = {"choices": [{"message": {"content": "tok"}}]}
    send, sent, slept = fake([limited_503, ok])
    assert patient(send, QUICK, sleep=slept.append, now=lambda: 0.0) == ok and slept == [2.0] and len(sent) == 2
    for reply in ({"error": "HTTP 503: busy", "status": 503, "retry_after": None},
                  {"error": "HTTP 500: boom", "status": 500, "retry_after": "1"},
                  {"error": "ConnectError: refused", "error_class": "transport"}):
        send, sent, slept = fake([reply])
        assert patient(send, QUICK, sleep=slept.append) == reply and (len(sent), slept) == (1, [])


def test_a_wait_beyond_the_budget_fails_at_once_naming_the_rate_limit():
    send, sent, slept = fake([{"error": "HTTP 429: slow down", "status": 429, "retry_after": "120"}])
    with counting() as tally:
        reply = patient(send, Patience(most_wait_s=60), sleep=slept.append, now=lambda: 0.0)
    assert (len(sent), slept, tally.retries) == (1, [], 0)
    assert reply["error_class"] == "admission_rejected" and reply["rate_limited"] is True
    assert reply["error"].startswith("rate limited: HTTP 429 and asked for 120.0 s more (Retry-After), "
                                     "beyond the 60 s a request waits in all (0 retries, 0.0 s waited)")
    assert "Last reply: HTTP 429: slow down" in reply["error"]


def test_back_off_grows_between_tries_without_a_retry_after():
    send, sent, slept = fake([{"error": "HTTP 429", "status": 429, "retry_after": None}])
    reply = patient(send, Patience(tries=4), sleep=slept.append, rng=random.Random(7))
    assert len(sent) == 4 and len(slept) == 3 and slept == sorted(slept)
    assert all(0.75 * 0.5 * 2 ** k <= s <= 0.5 * 2 ** k for k, s in enumerate(slept))
    assert reply["error"].startswith("rate limited: HTTP 429 on all 4 tries (3 retries, ")


def test_patience_refuses_no_tries():
    with pytest.raises(ValueError, match="Patience.tries: 0 would send nothing"):
        Patience(tries=0)


# -- over HTTP -------------------------------------------------------------------------------

def test_the_calibration_server_answers_every_nth_request_with_429_and_retry_after(start_calibration_server):
    server = start_calibration_server(rate_limit_every=3, retry_after="1")
    body = {"model": "calibration", "messages": [{"role": "user", "content": "x"}], "max_tokens": 2}
    with httpx.Client(base_url=server.base_url, trust_env=False) as c:
        replies = [c.post("/v1/chat/completions", json=body) for _ in range(6)]
    assert [r.status_code for r in replies] == [200, 200, 429, 200, 200, 429]
    assert replies[2].headers["retry-after"] == "1" and "retry-after" not in replies[0].headers
    assert replies[2].json()["error"]["code"] == "rate_limit_exceeded"


def test_the_calibration_server_refuses_a_rate_limit_of_no_request():
    from stackbook.harness.calibration_server import CalibrationServer
    with pytest.raises(ValueError, match="rate_limit_every: 0 names no request"):
        CalibrationServer(rate_limit_every=0)


def test_a_check_waits_out_a_429_with_retry_after_and_passes(start_calibration_server):
    server = start_calibration_server(rate_limit_every=2, retry_after="1")
    assert "error" not in chat_once(target(server), [{"role": "user", "content": "x"}])  # request 1; the check's is 2
    result = run_check(target(server), check())
    assert result["passed"] is True and server.requests == 3
    assert (result["rate_limit_retries"], result["rate_limit_wait_s"]) == (1, 1.0)
    assert result["detail"] == "all expected text present (after 1 rate-limit retry, 1.0 s waited)"
    assert verdict([result])["verdict"] == "PASS" and verdict([result])["rate_limit_retries"] == 1


def test_concurrent_requests_of_one_check_are_tallied(start_calibration_server):
    server = start_calibration_server(rate_limit_every=4, retry_after="0")
    spec = {"id": "same", "kind": "determinism", "prompt": "p", "repeats": 3, "max_tokens": 4}
    result = run_check(target(server), check(spec))  # 3 sequential, then 3 at once: one of those is 4th
    assert result["passed"] is True and server.requests == 7 and result["rate_limit_retries"] == 1
    assert "(after 1 rate-limit retry, 0.0 s waited)" in result["detail"]


def test_a_check_without_rate_limit_records_no_retry(start_calibration_server):
    server = start_calibration_server()
    result = run_check(target(server), check())
    assert result["passed"] is True and result["rate_limit_retries"] == 0
    assert result["detail"] == "all expected text present"


def test_a_permanent_429_fails_the_check_after_the_bounded_tries(start_calibration_server, monkeypatch):
    monkeypatch.setattr(rate_limit, "PATIENCE", QUICK)
    server = start_calibration_server()
    result = run_check(target(server, "calibration-http_429"), check())
    assert result["passed"] is False and server.requests == 5 and result["rate_limit_retries"] == 4
    assert result["detail"].startswith("rate limited: HTTP 429 on all 5 tries (4 retries, ")
    assert "the endpoint's rate limit left this untimed check no reply" in result["detail"]
    assert result["detail"].endswith("(after 4 rate-limit retries, "
                                     f"{result['rate_limit_wait_s']:.1f} s waited)")
    assert failure_class(result) == "admission_rejected"
    v = verdict([result])
    assert v["verdict"] == "HOLD" and v["reason"].startswith("every canary request was refused (admission_rejected: "
                                                             "rate limited: HTTP 429 on all 5 tries")


def test_the_probe_waits_out_a_429_on_its_stream_and_its_exact_length_request(start_calibration_server, monkeypatch):
    monkeypatch.setattr(rate_limit, "PATIENCE", QUICK)
    server = start_calibration_server(rate_limit_every=2, retry_after="1")
    with counting() as tally:
        rec = _stream_once(target(server), ApproximateTokenizer(), {"max_tokens": 4})  # 1
        accepted = exact_length_accepted(target(server), {}, n=4)  # 2 refused, 3
    assert rec["status"] == 200 and rec["error_class"] == "none"
    assert accepted == (True, "honoured: exactly 4 tokens") and server.requests == 3 and tally.retries == 1
    with counting() as tally:
        rec = _stream_once(target(server), ApproximateTokenizer(), {"max_tokens": 4})  # 4 refused, 5
    assert rec["status"] == 200 and server.requests == 5 and tally.retries == 1
