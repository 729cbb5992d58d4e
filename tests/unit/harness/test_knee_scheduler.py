"""The knee scheduler: its arithmetic, its closed-loop simulation against the closed forms and
against the step-by-step scheduler the server runs, and the true capacity under an SLO."""
import statistics

import pytest
from pydantic import ValidationError

from stackbook.harness.knee_scheduler import (Knee, Lengths, LoopRun, RequestTiming, SloBounds, StepBatch,
                                              simulate_closed_loop, steady_state)
from stackbook.harness.knee_truth import attainment_below_knee, true_capacity

KNEE = Knee(max_batch=4, t0_ms=20, t1_ms=5)


def test_a_step_costs_t0_plus_t1_per_sequence_and_parse_reads_milliseconds():
    assert KNEE.step_s(1) == pytest.approx(0.025) and KNEE.step_s(4) == pytest.approx(0.040)
    assert KNEE.steps_of(10) == 10 and Knee(max_batch=1, t0_ms=1, t1_ms=0, prefill_steps=3).steps_of(10) == 12
    k = Knee.parse("8, 20, 2.5")
    assert (k.max_batch, k.t0_ms, k.t1_ms, k.admit_window_ms) == (8, 20.0, 2.5, 2.0)
    assert Knee.parse("8,1,2").admit_window_ms == 1.0  # the window never exceeds t0
    for bad in ("8,20", "eight,20,2"):
        with pytest.raises(ValueError, match="expected B,t0_ms,t1_ms"):
            Knee.parse(bad)
    with pytest.raises(ValidationError, match="must not exceed t0_ms"):
        Knee(max_batch=2, t0_ms=1, t1_ms=1, admit_window_ms=3)


def test_below_the_knee_every_request_takes_one_step_at_b_equal_concurrency():
    run = simulate_closed_loop(KNEE, 3, 60, Lengths(16, 0.5), seed=3)
    assert len(run.timings) == 60 and {t.output_tokens for t in run.timings} != {16}  # lengths were drawn
    last_send = max(t.arrival_s for t in run.timings)  # from then on clients drop out and b falls
    steady = [t for t in run.timings if t.end_s <= last_send]
    assert len(steady) >= 50
    for t in steady:
        assert t.ttft_s == pytest.approx(KNEE.step_s(3)) and t.tpot_s == pytest.approx(KNEE.step_s(3))
        assert t.admitted_s == t.arrival_s
    two = Knee(max_batch=4, t0_ms=20, t1_ms=5, prefill_steps=2)
    assert simulate_closed_loop(two, 2, 4).timings[-1].ttft_s == pytest.approx(2 * two.step_s(2))


def test_past_the_knee_tpot_stays_at_b_and_the_wait_matches_littles_law():
    lengths = Lengths(32, 0.5)
    waits = []
    for c in (6, 8, 12):
        run = simulate_closed_loop(KNEE, c, 6000, lengths, seed=c)
        measured = run.measured(2 * c, 2 * c)
        assert {round(t.tpot_s, 9) for t in measured} == {round(KNEE.step_s(4), 9)}
        model = steady_state(KNEE, c, mean_steps=32)
        assert statistics.mean(t.e2e_s for t in measured) == pytest.approx(model["e2e_mean_s"], rel=0.03)
        waits.append(statistics.mean(t.admitted_s - t.arrival_s for t in measured))
        assert waits[-1] == pytest.approx(model["wait_mean_s"], rel=0.06)
    assert waits[0] < waits[1] < waits[2]
    # Fixed lengths, c = 2B: two cohorts take turns, so every wait is one whole cohort of 10 steps.
    fixed = simulate_closed_loop(KNEE, 8, 40, Lengths(10)).measured(8, 8)
    assert {round(t.ttft_s, 9) for t in fixed} == {round(11 * KNEE.step_s(4), 9)}


def test_a_seed_fixes_the_run_and_fewer_requests_than_clients_is_allowed():
    a, b = (simulate_closed_loop(KNEE, 6, 50, Lengths(20, 0.5), seed=1) for _ in range(2))
    assert a == b and a != simulate_closed_loop(KNEE, 6, 50, Lengths(20, 0.5), seed=2)
    small = simulate_closed_loop(KNEE, 10, 3)
    assert len(small.timings) == 3 and small.duration_s == pytest.approx(64 * KNEE.step_s(3))
    with pytest.raises(ValueError):
        simulate_closed_loop(KNEE, 0, 3)


def _step_by_step(knee: Knee, concurrency: int, requests: int, lengths: list[int]) -> LoopRun:
    """The same closed loop driven through StepBatch on a virtual clock, as the server drives it."""
    batch, now, sent = StepBatch(knee), 0.0, 0
    arrival, admitted, first, end = {}, {}, {}, {}

    def send(at):
        nonlocal sent
        arrival[sent] = at
        batch.submit(sent, lengths[sent])
        sent += 1

    for _ in range(concurrency):
        send(0.0)
    while not batch.idle:
        for i in batch.admit():
            admitted[i] = now
        now += batch.step_s()
        for i, token, last in batch.finish_step():
            if token == 0:
                first[i] = now
            if last:
                end[i] = now
                if sent < requests:
                    send(now)
    return LoopRun(tuple(RequestTiming(i, lengths[i], arrival[i], admitted[i], first[i], end[i])
                         for i in range(requests)), now)


def test_the_event_simulation_and_the_step_by_step_scheduler_agree():
    knee = Knee(max_batch=4, t0_ms=20, t1_ms=5, prefill_steps=2)
    fast = simulate_closed_loop(knee, 7, 80, Lengths(12, 0.6), seed=5)
    slow = _step_by_step(knee, 7, 80, [t.output_tokens for t in fast.timings])
    assert slow.duration_s == pytest.approx(fast.duration_s)
    for f, s in zip(fast.timings, slow.timings):
        assert (f.admitted_s, f.first_token_s, f.end_s) == pytest.approx((s.admitted_s, s.first_token_s, s.end_s))


def test_the_true_capacity_below_the_knee_is_where_the_step_crosses_the_bound():
    knee = Knee(max_batch=8, t0_ms=10, t1_ms=1)
    slo = SloBounds(tpot_s=0.0155)  # step(5) = 15 ms, step(6) = 16 ms
    assert attainment_below_knee(knee, slo, 5) == 1.0 and attainment_below_knee(knee, slo, 6) == 0.0
    truth = true_capacity(knee, slo, 0.95, Lengths(16, 0.5))
    assert truth.capacity == 5 and truth.margin() == (1.0, 0.0) and max(truth.attainment) == 8
    assert true_capacity(knee, SloBounds(ttft_s=0.005), 0.95, Lengths(16)).capacity == 0


def test_the_true_capacity_past_the_knee_is_read_from_the_queue():
    knee = Knee(max_batch=16, t0_ms=10, t1_ms=0.5)
    truth = true_capacity(knee, SloBounds(ttft_s=0.15, tpot_s=0.02), 0.95, Lengths(32, 0.5))
    at, above = truth.margin()
    assert truth.capacity == 17 and at >= 0.95 > above
    assert all(truth.attainment[c] == 1.0 for c in range(1, 17))
    assert [c for c, a in truth.attainment.items() if a < 0.95] == [18, 19, 20]
    with pytest.raises(ValueError, match="never binds"):
        true_capacity(knee, SloBounds(tpot_s=1.0), 0.95, Lengths(8), max_concurrency=20)
