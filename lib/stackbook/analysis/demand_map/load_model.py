"""Which network predicts a point's response, from how its load was made: a closed loop's clients,
a replayed log's sessions (each step sent after the reply before it: a closed loop whose pace the
engine sets, so its throughput is no offered rate), or an open loop's offered rate; and how far
that network misses the point it was measured at, before anything is ranked by it."""
from __future__ import annotations

import math
from dataclasses import dataclass

# The candidates are 10% cuts: a model that misses its own point by more than that cannot say
# what one of them buys.
OWN_POINT_TOLERANCE = 0.10


def session_replay(arrival: dict | None) -> bool:
    """Whether the protocol replayed a log by session (arrival kind trace, order session): each
    session a closed loop, whatever rate its schedule's timestamps imply."""
    a = arrival or {}
    return a.get("kind") == "trace" and a.get("order") == "session"


def in_flight(p: dict) -> float | None:
    """The mean number of the point's requests outstanding, as the client counted them (the
    engine's count where the client's is missing)."""
    return p.get("in_flight_mean", p.get("engine_in_flight_mean"))


def offered_load(p: dict, sessions: bool = False) -> str:
    """The load as the protocol set it: a concurrency, a replayed log's sessions, or an offered
    rate (never read as a count)."""
    if p.get("concurrency"):
        return f"concurrency {p['concurrency']}"
    if sessions:
        n, flight = (p.get("session_order") or {}).get("sessions"), in_flight(p)
        return (f"a replayed log's {f'{n} sessions' if n else 'sessions'}, each step after the reply before it"
                + (f" ({flight:.2f} in flight on average)" if flight is not None else ""))
    rate, scheduled = p.get("rate"), p.get("scheduled_rate_rps")
    if not rate:
        return f"a replayed trace offering {scheduled:.3g} req/s" if scheduled else "a replayed trace"
    if scheduled and abs(scheduled / rate - 1) > 0.01:
        return f"offered {rate:g} req/s (its seeded schedule {scheduled:.3g})"
    return f"offered {rate:g} req/s"


def offered_rate(p: dict) -> float | None:
    """The rate an open-loop point's schedule offered (what a queue's response depends on); a
    run recorded before the schedule's rate was kept falls back to the configured rate."""
    return p.get("scheduled_rate_rps") or p.get("rate")


@dataclass(frozen=True)
class PointLoad:
    """The network that predicts a point's response: closed at `population` (clients, or the
    mean a log's sessions kept in flight) or open at `rate_rps`; neither where none can."""
    words: str  # the load as the protocol set it
    model: str  # the network, in words (or why there is none)
    population: float | None = None
    rate_rps: float | None = None
    sessions: bool = False

    @property
    def predicts(self) -> bool:
        return self.population is not None or self.rate_rps is not None

    def lighter(self) -> str:
        """What a lighter load means for this kind of load."""
        if self.sessions:
            return ("the replayed log sets this load (each session waits on its replies), so a lighter one means "
                    "replaying fewer sessions (arrival.sessions), not a lower rate")
        return "test a lighter load first"


def point_load(p: dict, arrival: dict | None = None) -> PointLoad:
    """The network for one point, given the protocol's arrival pattern (passport.protocol.arrival)."""
    sessions = session_replay(arrival)
    words = offered_load(p, sessions)
    if p.get("concurrency"):
        n = int(p["concurrency"])
        return PointLoad(words, f"a closed network of {n} client{'s' if n > 1 else ''} (exact MVA)", population=n)
    if sessions:
        flight = in_flight(p)
        if not flight:
            return PointLoad(words, "none: a replayed log's sessions form a closed loop, and this point records no "
                             "mean in flight to size it", sessions=True)
        return PointLoad(words, f"a closed network of the replayed sessions at N = {flight:.2f}, the mean they kept in "
                         "flight (MVA between the whole populations either side): each session waits on its reply, so "
                         "the engine sets their pace and their throughput is no offered rate",
                         population=flight, sessions=True)
    rate = offered_rate(p)
    if not rate:
        return PointLoad(words, "none: the point records neither a concurrency nor an offered rate")
    return PointLoad(words, f"an open network at the {rate:.3g} req/s its schedule offered", rate_rps=rate)


def own_point_error_pct(predicted_ms: float, measured_ms: float | None) -> float | None:
    """The model's error at the point its demands came from, in % of the measured mean E2E; None
    where either side has no finite value (an open network past saturation predicts no mean)."""
    if measured_ms is None or not measured_ms > 0 or not math.isfinite(predicted_ms):
        return None
    return 100 * (predicted_ms - measured_ms) / measured_ms


def own_point_refusal(error_pct: float | None, predicted_ms: float, measured_ms: float, point: str) -> str | None:
    """Why nothing is ranked when the model misses its own point beyond OWN_POINT_TOLERANCE; None
    where it does not."""
    if error_pct is None or abs(error_pct) <= 100 * OWN_POINT_TOLERANCE:
        return None
    return (f"no candidate is ranked: the model misses its own point, predicting {predicted_ms:,.0f} ms mean E2E at "
            f"{point} where {measured_ms:,.0f} ms was measured ({error_pct:+.0f}%, beyond the "
            f"±{OWN_POINT_TOLERANCE:.0%} within which it can say what a {OWN_POINT_TOLERANCE:.0%} cut buys)")
