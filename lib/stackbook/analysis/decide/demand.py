"""Peak demand from daily users by Little's law, set against the live sequences memory allows."""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class PeakDemand:
    """Requests in flight from daily users, by Little's law (L = arrival rate x time in system),
    applied twice: to sessions (open for `session_minutes`) and to requests (in flight for the
    part of a session not spent thinking)."""
    daily_users: int
    sessions_per_user: float
    session_minutes: float
    requests_per_session: int
    think_time_s: float
    working_hours: float
    peak_to_average: float

    @property
    def seconds_per_request(self) -> float:
        """A session is requests x (reply time + think time): the reply time is what is left."""
        return self.session_minutes * 60 / self.requests_per_session - self.think_time_s

    @property
    def sessions_per_s(self) -> float:
        return self.daily_users * self.sessions_per_user / (self.working_hours * 3600)

    @property
    def concurrent_sessions(self) -> float:
        return self.sessions_per_s * self.session_minutes * 60

    @property
    def requests_per_s(self) -> float:
        return self.sessions_per_s * self.requests_per_session

    @property
    def mean_in_flight(self) -> float:
        return self.requests_per_s * self.seconds_per_request

    @property
    def peak_in_flight(self) -> float:
        return self.mean_in_flight * self.peak_to_average

    @property
    def peak_sessions(self) -> int:
        """Sessions open at once at the peak: the concurrent users the shortlist reads."""
        return max(1, math.ceil(self.concurrent_sessions * self.peak_to_average))


def peak_demand(daily_users: int, session_minutes: float, requests_per_session: int, think_time_s: float,
                working_hours: float = 8.0, peak_to_average: float = 3.0, sessions_per_user: float = 1.0) -> PeakDemand:
    d = PeakDemand(daily_users, sessions_per_user, session_minutes, requests_per_session, think_time_s,
                   working_hours, peak_to_average)
    if d.seconds_per_request <= 0:
        raise ValueError(f"{requests_per_session} requests with {think_time_s} s of thinking each take longer than "
                         f"a {session_minutes}-minute session: lengthen the session or shorten the think time")
    return d


def demand_table(d: PeakDemand) -> list[dict]:
    """Each step of the Little's-law arithmetic with how it was computed."""
    return [
        {"quantity": "sessions per second", "value": round(d.sessions_per_s, 5),
         "how": f"{d.daily_users} users x {d.sessions_per_user:g} sessions / {d.working_hours:g} h"},
        {"quantity": "sessions open at once (mean)", "value": round(d.concurrent_sessions, 2),
         "how": f"Little's law: sessions per second x {d.session_minutes * 60:g} s per session"},
        {"quantity": "seconds per reply", "value": round(d.seconds_per_request, 2),
         "how": f"{d.session_minutes * 60:g} s / {d.requests_per_session} requests - {d.think_time_s:g} s thinking"},
        {"quantity": "requests per second", "value": round(d.requests_per_s, 4),
         "how": f"sessions per second x {d.requests_per_session} requests"},
        {"quantity": "requests in flight (mean)", "value": round(d.mean_in_flight, 2),
         "how": "Little's law: requests per second x seconds per reply"},
        {"quantity": "requests in flight (peak)", "value": round(d.peak_in_flight, 2),
         "how": f"mean x peak-to-average {d.peak_to_average:g}"},
        {"quantity": "sessions open at once (peak)", "value": d.peak_sessions,
         "how": f"mean x {d.peak_to_average:g}, rounded up"},
    ]


def demand_sentence(d: PeakDemand, live_sequences: int, context_tokens: int) -> str:
    """Peak requests in flight set against the live sequences the memory arithmetic allows."""
    peak = math.ceil(d.peak_in_flight)
    head = (f"{d.daily_users} daily users over a working day of {d.working_hours:g} hours keep "
            f"**{d.concurrent_sessions:.1f} "
            f"sessions** open on average; with {d.requests_per_session} requests per "
            f"{d.session_minutes:g}-minute session and {d.think_time_s:g} s of thinking between them, a reply takes "
            f"{d.seconds_per_request:.1f} s and **{d.mean_in_flight:.2f} requests** are in flight on average, "
            f"**{d.peak_in_flight:.2f}** at a peak {d.peak_to_average:g} times the average. ")
    if live_sequences >= peak:
        return head + (f"The arithmetic allows **{live_sequences} live sequences** of {context_tokens:,} tokens, "
                       f"{live_sequences / peak:.0f} times the peak: the cache is not what limits this team.")
    return head + (f"The arithmetic allows only **{live_sequences} live sequences** of {context_tokens:,} tokens, "
                   f"short of the peak of {peak}: quantize, add cards, or shorten the context.")
