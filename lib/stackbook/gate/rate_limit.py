"""Waiting out a rate limit in the gate. The gate's requests are untimed: an endpoint that answers
429 (or 503 with Retry-After) is asked again after the wait it names, or after an exponential
back-off with jitter, as the OpenAI SDK does, for a bounded number of tries and a bounded total
wait. Only the sweep counts a 429, as a rejection: its requests never come through here.

Every retry is tallied for the check that made it, so its result says how often it waited."""
from __future__ import annotations

import contextlib
import contextvars
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from email.utils import parsedate_to_datetime


@dataclass(frozen=True)
class Patience:
    """How long one request waits out a rate limit: tries in all, the total wait, the back-off."""
    tries: int = 5
    most_wait_s: float = 60.0
    first_backoff_s: float = 0.5
    longest_backoff_s: float = 8.0

    def __post_init__(self) -> None:
        if self.tries < 1:
            raise ValueError(f"Patience.tries: {self.tries} would send nothing; give 1 or more")


PATIENCE = Patience()


def retry_after_s(value: str | None, now_unix: float) -> float | None:
    """The wait a Retry-After header names, in seconds: a number of seconds or an HTTP date (a
    date already past is no wait); None when there is no header or it is neither."""
    if value is None or not value.strip():
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - now_unix)
        except (TypeError, ValueError, IndexError):
            return None
    return max(0.0, seconds) if seconds == seconds else None  # NaN is no wait named


def backoff_s(retry: int, jitter: float, patience: Patience = PATIENCE) -> float:
    """The wait before retry number `retry` (0 first) where the endpoint names none: doubling from
    the first back-off up to the longest, less up to a quarter at random (`jitter` in [0, 1)), so
    clients refused together do not come back together."""
    return min(patience.first_backoff_s * 2 ** retry, patience.longest_backoff_s) * (1 - 0.25 * jitter)


def rate_limited(reply: dict) -> bool:
    """A 429, or a 503 that names when to come back: the endpoint asks to be asked again later."""
    status = reply.get("status")
    return status == 429 or (status == 503 and reply.get("retry_after") is not None)


class Tally:
    """The retries and the seconds waited by one check's requests (its threads' too)."""

    def __init__(self) -> None:
        self.retries, self.waited_s = 0, 0.0
        self._lock = threading.Lock()

    def add(self, retries: int, waited_s: float) -> None:
        with self._lock:
            self.retries += retries
            self.waited_s += waited_s

    def fields(self) -> dict:
        return {"rate_limit_retries": self.retries, "rate_limit_wait_s": round(self.waited_s, 2)}

    def note(self) -> str:
        """What the check's detail adds: nothing when it never waited."""
        if not self.retries:
            return ""
        return (f" (after {self.retries} rate-limit retr{'y' if self.retries == 1 else 'ies'}, "
                f"{self.waited_s:.1f} s waited)")


_TALLY: contextvars.ContextVar[Tally | None] = contextvars.ContextVar("rate_limit_tally", default=None)


@contextlib.contextmanager
def counting() -> Iterator[Tally]:
    """Tally the retries of every request sent inside (threads started with a copy of this
    context included)."""
    tally = Tally()
    token = _TALLY.set(tally)
    try:
        yield tally
    finally:
        _TALLY.reset(token)


def patient(send: Callable[[], dict], patience: Patience | None = None, sleep=time.sleep,
            now=time.time, rng: random.Random | None = None) -> dict:
    """`send()` until its reply is not rate-limited, waiting between tries; `send` returns a reply
    dict whose `status` and `retry_after` (the header) say whether and how long to wait. A reply
    still rate-limited after the last try, or one asking for more than the wait left, comes back
    with an error that names the rate limit and what was tried."""
    patience = patience or PATIENCE
    rng = rng or random.Random()
    retries, waited = 0, 0.0
    try:
        while True:
            reply = send()
            if not rate_limited(reply):
                return reply
            named = retry_after_s(reply.get("retry_after"), now())
            wait = named if named is not None else backoff_s(retries, rng.random(), patience)
            if retries + 1 >= patience.tries:
                why = f"on all {patience.tries} tries"
                break
            if waited + wait > patience.most_wait_s:
                why = (f"and asked for {wait:.1f} s more ({'Retry-After' if named is not None else 'back-off'}), "
                       f"beyond the {patience.most_wait_s:.0f} s a request waits in all")
                break
            sleep(wait)
            retries, waited = retries + 1, waited + wait
    finally:
        tally = _TALLY.get()
        if tally is not None:
            tally.add(retries, waited)
    return reply | {"error_class": "admission_rejected", "rate_limited": True, "error": (
        f"rate limited: HTTP {reply.get('status')} {why} ({retries} retries, {waited:.1f} s waited); the "
        "endpoint's rate limit left this untimed check no reply: raise the limit for this key or run when "
        f"the endpoint is less busy. Last reply: {str(reply.get('error', ''))[:200]}")}
