"""Queueing formulas against open-loop points: Lindley's recursion on hand-built records, the
measured coefficients of variation, Kingman against Pollaczek-Khinchine, the unstable outcome,
and the batching engine's fallback."""
from types import SimpleNamespace

import numpy as np
import pytest
from stackbook.engines.llama_cpp import LlamaCppEngine
from stackbook.engines.vllm_cpu import VllmCpuEngine
from stackbook.config.arrival_patterns import ArrivalLaw
from stackbook.analysis import open_loop_waits as olw
from stackbook.analysis import queueing
from stackbook.config.loading import parse_campaign
from stackbook.stats import mean_ci95

from tests.support.records import request_record


def record(i, sent, end, phase="measure", point="rate1-r0", first=None, ok=True):
    return request_record(run_id="t", point=point, phase=phase, concurrency=0, request_index=i, scheduled_s=sent,
                          sent_s=sent, end_s=end, sent_unix=1e9 + sent, first_token_s=first if first is not None
                          else end,
                          prompt_tokens_client=8, error_class="none" if ok else "timeout")


# --------------------------------------------------------------------------- Lindley

def test_lindley_waits_and_services_with_a_queue_and_an_idle_gap():
    sent = [0.0, 1.0, 1.5, 5.0]
    end = [2.0, 3.0, 4.0, 6.0]
    waits, services = olw.lindley(sent, end)
    # r1 waits for r0 to leave at 2; r2 for r1 at 3; the server is idle from 4 to 5, so r3 does not wait
    assert waits == pytest.approx([0.0, 1.0, 1.5, 0.0])
    assert services == pytest.approx([2.0, 1.0, 1.0, 1.0])


def test_lindley_arrival_at_the_instant_of_a_departure_does_not_wait():
    waits, services = olw.lindley([0.0, 2.0], [2.0, 3.0])
    assert waits == [0.0, 0.0]
    assert services == [2.0, 1.0]


def test_lindley_follows_the_order_the_server_chose():
    # one slot: request 2 arrives as request 0 leaves and is served before request 1, which waited
    waits, services = olw.lindley([0.0, 0.5, 1.0], [1.0, 3.0, 2.0])
    assert waits == pytest.approx([0.0, 1.5, 0.0]) and services == pytest.approx([1.0, 1.0, 1.0])


def test_lindley_refuses_times_from_different_clocks():
    with pytest.raises(ValueError, match="ended before it was sent"):
        olw.lindley([0.0, 2.0], [1.0, 1.5])


# --------------------------------------------------------------------------- coefficients of variation

def test_constant_arrivals_have_zero_arrival_cv():
    assert olw.inter_arrival_cv([0.0, 0.5, 1.0, 1.5, 2.0]) == 0.0


def test_arrival_cv_of_a_known_sequence():
    # gaps 1, 3, 1: mean 5/3, sample variance 4/3, so C_a^2 = (4/3) / (25/9) = 0.48
    assert olw.inter_arrival_cv([0.0, 1.0, 4.0, 5.0]) ** 2 == pytest.approx(0.48)
    # the order of the send times does not matter: the gaps are between consecutive sends
    assert olw.inter_arrival_cv([5.0, 0.0, 4.0, 1.0]) ** 2 == pytest.approx(0.48)


def test_cv_needs_two_values():
    assert olw.coefficient_of_variation([1.0]) is None


def test_batch_means_interval_is_the_t_interval_of_the_batch_means():
    v = np.arange(50, dtype=float)
    mean, half = olw.batch_means_ci95(v)
    assert mean == pytest.approx(24.5)
    batch_means = [v[i:i + 5].mean() for i in range(0, 50, 5)]  # 10 batches of 5
    assert half == pytest.approx(mean_ci95(batch_means)[1])
    assert olw.batch_means_ci95([1.0, 2.0, 3.0]) == (2.0, None)  # too few for two batches of five


# --------------------------------------------------------------------------- the formulas

def test_kingman_equals_pollaczek_khinchine_at_ca_1():
    p = queueing.predict_wait(0.5, 1.0, 1.0, 0.5, poisson_arrivals=True)
    assert p.outcome == "stable" and p.utilization == pytest.approx(0.5)
    # M/G/1 at rho = 0.5, S = 1, Cs^2 = 0.25: 0.5 / 0.5 x 1.25 / 2 = 0.625
    assert p.pollaczek_khinchine_s == pytest.approx(0.625)
    assert p.kingman_s == pytest.approx(p.pollaczek_khinchine_s)
    assert queueing.pollaczek_khinchine_wait(0.5, 1.0, 0.5) == pytest.approx(0.625)


def test_pk_is_given_only_for_poisson_arrivals():
    p = queueing.predict_wait(0.5, 1.0, 2.0, 0.0, poisson_arrivals=False)
    assert p.pollaczek_khinchine_s is None
    assert p.kingman_s == pytest.approx(2.0)  # 0.5 / 0.5 x (4 + 0) / 2 x 1


def test_unstable_queue_is_an_outcome_not_an_exception():
    p = queueing.predict_wait(1.2, 1.0, 1.0, 0.0, poisson_arrivals=True)
    assert p.outcome == queueing.UNSTABLE == "unstable (ρ ≥ 1)"
    assert (p.kingman_s, p.pollaczek_khinchine_s) == (None, None)
    assert p.utilization == pytest.approx(1.2)
    assert not p.stable


# --------------------------------------------------------------------------- one point

POISSON = ArrivalLaw("poisson", 1.0, True)


def single_server_point(records, rate=1.0):
    return olw.PointData(records, {"rate": rate}, None)


def test_single_server_point_measures_waits_by_lindley_and_predicts():
    # warm-up r0 keeps the server busy until 1.0; measured requests then queue behind each other
    recs = [record(0, 0.0, 1.0, phase="warmup"), record(1, 0.5, 1.5), record(2, 1.0, 2.0), record(3, 3.0, 3.5),
            record(4, 4.0, 4.5), record(5, 4.2, 5.0, phase="sentinel"), record(6, 6.0, 6.5),
            record(7, 6.1, 7.0, phase="cooldown")]
    row = olw.analyse_point("a", "rate1-r0", "accepted", POISSON, olw.SingleServerFifo(), single_server_point(recs))
    # measured waits: r1 0.5 (behind the warm-up), r2 0.5, r3 0, r4 0, r6 0 -> mean 0.2 s
    assert row.wait_ms_mean == pytest.approx(200.0)
    # service of everything sent in the window (measured and sentinel): 0.5, 0.5, 0.5, 0.5, 0.5 (r5 starts at 4.5), 0.5
    assert row.service_ms_mean == pytest.approx(500.0)
    assert row.service_cv == pytest.approx(0.0)
    # arrivals in the window (measured and sentinel): 0.5, 1, 3, 4, 4.2, 6 -> mean gap 1.1 s
    gaps = np.diff([0.5, 1.0, 3.0, 4.0, 4.2, 6.0])
    assert row.arrival_cv == pytest.approx(gaps.std(ddof=1) / gaps.mean())
    assert row.arrival_rate_rps == pytest.approx(1 / 1.1)
    assert row.utilization == pytest.approx(0.5 / 1.1)
    # throughput: the six served from the first send (0.5) to the last end (6.5)
    assert row.throughput_rps == pytest.approx(1.0)
    rho = 0.5 / 1.1
    expected = rho / (1 - rho) * (row.arrival_cv**2 + 0) / 2 * 500.0
    assert row.kingman_ms == pytest.approx(expected)
    assert row.pk_ms == pytest.approx(rho / (1 - rho) * 0.5 * 500.0)
    assert row.kingman_error_pct == pytest.approx(100 * (expected - 200.0) / 200.0)
    assert row.outcome == "stable" and row.server.startswith("single server")


def test_single_server_point_served_out_of_arrival_order_measures_waits_in_completion_order():
    # request 1 arrives while 0 is served and is served after it; request 2 arrives just as 0
    # leaves and takes the slot first (as llama-server's one slot can): 1 waits for 0 and 2
    recs = [record(0, 0.0, 1.0), record(1, 0.5, 3.0), record(2, 1.0, 2.0)]
    row = olw.analyse_point("a", "p", "accepted", POISSON, olw.SingleServerFifo(), single_server_point(recs))
    assert row.wait_ms_mean == pytest.approx((0 + 1500 + 0) / 3)
    assert row.service_ms_mean == pytest.approx(1000.0)


def test_overloaded_point_reads_unstable():
    # sends every 10 ms, each served for a second: 100 requests a second offered to a server of one
    recs = [record(0, 0.0, 1.0, phase="warmup"), record(1, 0.01, 2.0, phase="warmup")]
    recs += [record(2 + i, 0.02 + 0.01 * i, 3.0 + i) for i in range(4)]
    row = olw.analyse_point("a", "p", "accepted", POISSON, olw.SingleServerFifo(), single_server_point(recs))
    assert row.utilization == pytest.approx(100.0)
    assert row.throughput_rps < 1  # what the server did serve: never above 1/S
    assert row.outcome == "unstable (ρ ≥ 1)"
    assert row.kingman_ms is None and row.pk_ms is None
    assert row.wait_ms_mean == pytest.approx(np.mean([1.98, 2.97, 3.96, 4.95]) * 1000)


# --------------------------------------------------------------------------- batching engines

def test_server_model_follows_the_engines_concurrency():
    one_slot = LlamaCppEngine(kind="llama_cpp", parallel=1)
    assert isinstance(olw.server_model(one_slot, {}), olw.SingleServerFifo)
    assert olw.server_model(LlamaCppEngine(kind="llama_cpp", parallel=4), {}) == olw.BatchingServer(4)
    # vLLM: KV room for 22.75 sequences, but max_num_seqs serves 4 at a time
    vllm = VllmCpuEngine(kind="vllm_cpu", max_num_seqs=4)
    record = {"realized_capacity": {"max_concurrency": 22.75, "kv_tokens": 46592}}
    assert olw.concurrent_sequences(vllm, record) == 4
    # no cap configured: the realized capacity decides
    assert olw.concurrent_sequences(VllmCpuEngine(kind="vllm_cpu"), record) == 22.75
    assert isinstance(olw.server_model(VllmCpuEngine(kind="vllm_cpu", max_num_seqs=1), {}), olw.SingleServerFifo)
    assert olw.server_model(None, {}) == olw.BatchingServer(None)  # unknown: the exact reading is not claimed


def test_batching_engine_uses_its_queue_histogram_where_recorded():
    recs = [record(0, 0.0, 1.0, first=0.2), record(1, 0.1, 1.2, first=0.9)]
    data = olw.PointData(recs, {"rate": 2.0, "engine_time_ms": {"queue": 12.5}}, 100.0)
    row = olw.analyse_point("a", "p", "accepted", POISSON, olw.BatchingServer(4), data)
    assert row.wait_ms_mean == 12.5 and row.wait_source.startswith("the engine's queue-time")
    assert row.kingman_ms is None and row.pk_ms is None and row.utilization is None
    assert "G/G/1 does not apply" in row.outcome


def test_batching_engine_falls_back_to_ttft_above_light_load():
    light = [record(i, i * 2.0, i * 2.0 + 1, point="rate0.5-r0", first=i * 2.0 + t)
             for i, t in enumerate([0.10, 0.12, 0.30])]           # median TTFT 120 ms
    heavy = [record(i, i * 0.5, i * 0.5 + 1.5, point="rate2-r0", first=i * 0.5 + t)
             for i, t in enumerate([0.2, 0.4, 0.3, 0.5])]          # mean TTFT 350 ms
    summaries = {"rate0.5-r0": {"rate": 0.5}, "rate2-r0": {"rate": 2.0}}
    rows = olw.arm_points("a", POISSON, olw.BatchingServer(4), summaries,
                          {"rate0.5-r0": light, "rate2-r0": heavy}, {})
    by_point = {r.point: r for r in rows}
    assert by_point["rate2-r0"].wait_ms_mean == pytest.approx(350.0 - 120.0)
    assert by_point["rate2-r0"].wait_source == "mean TTFT − light-load TTFT"
    assert by_point["rate0.5-r0"].wait_ms_mean is None      # its own reference
    assert "lightest load" in by_point["rate0.5-r0"].outcome


def test_engine_queue_field_absent_or_malformed_reads_as_absent():
    assert olw.engine_queue_ms({}) is None
    assert olw.engine_queue_ms({"engine_time_ms": {"prefill": 3.0}}) is None
    assert olw.engine_queue_ms({"engine_time_ms": {"queue": None, "prefill": 3.0, "source": "llama-server"}}) is None
    assert olw.engine_queue_ms({"engine_time_ms": {"queue": 7.0, "source": "engine histograms"}}) == 7.0


# --------------------------------------------------------------------------- a run's arms

def write_records(path, recs):
    path.write_text("".join(r.model_dump_json() + "\n" for r in recs))
    return SimpleNamespace(requests=path)


def test_open_loop_points_reads_each_arm_marks_discards_and_skips_closed_loops(tmp_path):
    c = parse_campaign({
        "name": "t", "variables_under_test": ["arrival"],
        "protocol": {"workload": {"kind": "synthetic", "prompt_tokens": 16, "output_tokens": 8},
                     "arrival": {"kind": "poisson", "rates": [1.0]}},
        "arms": [{"name": "open", "engine": {"kind": "llama_cpp", "parallel": 1}},
                 {"name": "closed", "engine": {"kind": "llama_cpp", "parallel": 1},
                  "protocol_overrides": {"arrival": {"kind": "closed_loop", "concurrency": [1]}}}]})
    (tmp_path / "open").mkdir()
    recs = [record(i, float(i), i + 0.5) for i in range(6)]
    arms = {"open": {"arm": c.arms[0], "dir": write_records(tmp_path / "open" / "r.jsonl", recs),
                     "engine": {"configured_capacity": {"slots": 1}},
                     "results": {"sweep": {"points": {"rate1-r0": {"rate": 1.0, "discarded": True}}}}},
            "closed": {"arm": c.arms[1], "dir": None, "engine": {},
                       "results": {"sweep": {"points": {"c1-r0": {"concurrency": 1}}}}}}
    frame = olw.open_loop_points(c, arms)
    assert list(frame["arm"]) == ["open"]
    row = frame.iloc[0]
    assert row["status"] == "discarded" and row["arrival_cv"] == 0.0 and row["wait_ms_mean"] == 0.0
    assert row["service_ms_mean"] == pytest.approx(500.0) and row["utilization"] == pytest.approx(0.5)
    # a discarded point is shown but not concluded from
    assert olw.conclusions(frame) == ["No accepted point has a measured wait: nothing to conclude."]
    assert "C_a (measured)" in olw.display_table(frame).columns
    closed_only = {"closed": arms["closed"]}
    assert olw.open_loop_points(c, closed_only).empty
    assert "closed_loop" in olw.absent_because(c, closed_only)


def test_conclusions_compare_the_least_and_most_variable_accepted_points():
    import pandas as pd
    rows = [{"status": "accepted", "arrival": a, "arrival_cv": ca, "wait_ms_mean": w, "utilization": 0.65,
             "rate_rps": 1.1,
             "kingman_error_pct": k, "pk_error_pct": pk, "outcome": "stable"}
            for a, ca, w, k, pk in [("constant", 0.0, 5.0, -40.0, None), ("poisson", 1.0, 300.0, 10.0, 10.0),
                                    ("gamma (C_a² = 4)", 2.0, 1200.0, -20.0, None)]]
    rows.append({**rows[0], "status": "discarded (on_invalid_load: x)", "arrival_cv": 3.0, "wait_ms_mean": 1.0})
    lines = olw.conclusions(pd.DataFrame(rows))
    assert lines[0].startswith("At 1.1 req/s, ρ 0.65–0.65: measured mean wait 5 ms at C_a² = 0.00 (constant) and "
                               "1200 ms at C_a² = 4.00")
    assert "more arrival variance, longer waits" in lines[0]
    assert lines[1] == "Kingman: mean absolute error 23% over 3 accepted point(s) (from -40% to +10%)."
    assert lines[2] == "P-K: mean absolute error 10% over 1 accepted point(s) (from +10% to +10%)."
    # one arrival kind at several rates (a rate sweep) says nothing about burstiness
    sweep = pd.DataFrame([{**rows[1], "rate_rps": r, "kingman_error_pct": None, "pk_error_pct": None}
                          for r in (0.5, 1.0)])
    assert olw.conclusions(sweep)[0].startswith("No rate was run under more than one arrival kind")


def test_status_names_the_rules_and_leaves_their_figures_to_the_discards_table():
    assert olw.short_status("discarded (on_invalid_load: schedule_lag_ms_p99=11.6, in_flight_mean=7.0)") == \
        "discarded (on_invalid_load)"
    assert olw.short_status("discarded (max_failed_fraction: 3/24 failed; on_invalid_load: x=1)") == \
        "discarded (max_failed_fraction, on_invalid_load)"
    assert olw.short_status("HOLD") == "HOLD"


def test_arrival_kinds_say_their_scheduled_variance():
    c = parse_campaign({"name": "t", "protocol": {"arrival": {"kind": "gamma", "rates": [1.0], "burstiness": 4}},
                        "arms": [{"name": "a", "engine": {"kind": "llama_cpp"}}]})
    assert c.protocol.arrival.arrival_law() == ArrivalLaw("gamma (C_a² = 4)", 4.0, False)
    gamma_one = c.protocol.arrival.model_copy(update={"burstiness": 1.0})
    assert gamma_one.arrival_law().poisson  # a gamma law of shape 1 is the exponential
    closed = parse_campaign({"name": "t", "arms": [{"name": "a", "engine": {"kind": "llama_cpp"}}]})
    assert closed.protocol.arrival.arrival_law() is None
