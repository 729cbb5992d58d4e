"""The measured demand map: resource centres from the utilisation law, the bound beside the
measured saturation throughput, MVA on centres, the next experiment, and 'not measured' for runs
recorded before the runtime evidence existed."""
import json
from pathlib import Path

import pytest

from stackbook.analysis import plots
from stackbook.analysis.demand_map import (
    SEED_LAYERS,
    Layer,
    bound_table,
    centres_table,
    compute_capacity,
    demand_map,
    layers_table,
    measured_demand_map,
    measured_demand_maps,
    mva_on_centres,
    next_experiment_table,
    next_experiments,
    open_response_ms,
    point_centres,
)

VLLM_ENGINE = {"launch": {"command": ["python", "-m", "vllm.entrypoints.openai.api_server"]},
               "host": {"physical_cores": 2}, "ready_after_s": 48.9}
VLLM_LOG = "(EngineCore pid=4618) INFO [ompmultiprocessing.py:185] \tlocal_rank=0, core ids=[0]\n"


def point(load, client, api, core, throughput, e2e, *, discarded=False, batch=None):
    return {"level": f"c{load}", "load": load, "concurrency": load, "requests": 12, "completed": 12,
            "request_throughput_rps": throughput, "e2e_ms_mean": e2e, "discarded": discarded,
            "cpu_seconds": {"client": client, "engine": {"api_server": api, "engine_core": core}},
            "requests_in_cpu_window": 12, "work_tokens": {"prompt_tokens": 1536, "generated_tokens": 768,
                                                          "source": "engine counters"},
            "batch_size_mean": batch, "engine_in_flight_mean": float(load),
            "engine_time_ms": {"queue": 1.0, "prefill": 20.0, "decode": 3000.0,
                                                         "inference": 3020.0, "source": "engine histograms"}}


def results():
    return {"sweep": {"points": {
        "c1-r0": point(1, 0.36, 0.6, 36.0, 0.3125, 3200.0, batch=1.0),
        "c4-r0": point(4, 0.6, 1.2, 24.0, 0.45, 8000.0, batch=3.2),
        # discarded: its higher throughput must never count as saturation, nor its demands
        "c8-r0": point(8, 0.6, 1.2, 12.0, 0.9, 9000.0, discarded=True),
    }, "load_validity": {"c1-r0": {"valid": True}, "c4-r0": {"valid": True}, "c8-r0": {"valid": True}}}}


def test_demands_from_the_utilisation_law_on_hand_computed_numbers():
    centres = {c.name: c for c in point_centres(results()["sweep"]["points"]["c4-r0"], VLLM_ENGINE, VLLM_LOG)}
    assert set(centres) == {"client", "engine front end", "engine compute"}
    assert centres["client"].demand_ms == pytest.approx(50.0)            # 0.6 s / 12 requests
    assert centres["engine front end"].demand_ms == pytest.approx(100.0)  # 1.2 s / 12
    compute = centres["engine compute"]
    assert compute.visits == 64 and compute.service_ms == pytest.approx(31.25)  # 768 tokens / 12; 2000 ms / 64
    assert compute.demand_ms == pytest.approx(2000.0) and compute.capacity == 1.0
    assert "core(s) [0]" in compute.why_m


def test_bound_beside_measured_saturation():
    d = measured_demand_map("vllm-cpu", results(), VLLM_ENGINE, VLLM_LOG)
    assert d.status == "measured" and d.point == "c4-r0"    # the highest valid load, not the discarded c8
    assert d.bottleneck == "engine compute"
    assert d.bound_rps == pytest.approx(0.5)                 # 1000 / 2000 ms
    assert d.measured_saturation_rps == 0.45 and d.saturation_point == "c4-r0"
    assert d.measured_over_bound == pytest.approx(0.9)       # the bottleneck's utilisation
    assert "busy 90% of the point's CPU window, idle 10%" in d.why_not_closer
    assert "3.2 requests at a time on average while 4.00 were in flight" in d.why_not_closer
    assert d.unattributed_ms == pytest.approx(120.0)         # 3200 - (30 + 50 + 3000) at the lightest load
    assert d.startup_s == 48.9
    row = bound_table({"vllm-cpu": d}).loc["vllm-cpu"]
    assert row["bound (req/s)"] == pytest.approx(0.5) and row["measured / bound"] == pytest.approx(0.9)
    assert centres_table(d).loc["engine compute", "D/m (ms)"] == pytest.approx(2000.0)


def test_compute_capacity_from_threads_log_or_host():
    assert compute_capacity({"launch": {"command": ["llama-server", "--threads", "3"]}})[0] == 3.0
    assert compute_capacity({}, "core ids=[0, 1, 2, 3]")[0] == 4.0
    assert compute_capacity({"host": {"physical_cores": 2}})[0] == 2.0


def test_mva_on_two_centres_matches_hand_computation():
    # D = 200 and 100 ms. N=1: R = 300 ms, X = 3.333/s. N=2: Q(1) = X*R_k = (0.6667, 0.3333);
    # R_1 = 200 x 1.6667 = 333.33, R_2 = 100 x 1.3333 = 133.33; R = 466.67 ms; X = 2 / 0.46667 = 4.2857/s.
    curve = mva_on_centres([Layer("a", 1, 200.0), Layer("b", 2, 50.0)], 2)
    assert curve[0]["response_ms"] == pytest.approx(300.0) and curve[0]["throughput_rps"] == pytest.approx(10 / 3)
    assert curve[1]["response_ms"] == pytest.approx(466.6667, rel=1e-5)
    assert curve[1]["throughput_rps"] == pytest.approx(4.285714, rel=1e-5)
    with_delay = mva_on_centres([Layer("a", 1, 200.0)], 1, delay_ms=50.0)
    assert with_delay[0]["response_ms"] == pytest.approx(250.0)


def test_mva_check_is_exact_at_its_own_fit_point_and_scores_the_held_out_loads():
    d = measured_demand_map("vllm-cpu", results(), VLLM_ENGINE, VLLM_LOG)
    light = [r for r in d.mva_check if r["fit"].startswith("demands at the lightest")]
    assert [r["concurrency"] for r in light] == [1, 4]      # the discarded point is not a check
    assert light[0]["held_out"] is False and light[0]["e2e_error_pct"] == pytest.approx(0.0, abs=1e-9)
    assert light[1]["held_out"] is True
    # The lightest point's demands (3000 ms of compute) bound throughput at 1/3.08 s: at N=4 the
    # model under-predicts a batching engine's throughput, and says so by its error.
    assert light[1]["predicted_rps"] < light[1]["measured_rps"]


def test_next_experiment_ranks_the_bottleneck_first_by_end_to_end_sensitivity():
    centres = [Layer("client", 1, 50.0), Layer("engine front end", 1, 100.0), Layer("engine compute", 64, 31.25)]
    rows = next_experiments(centres, 4, 0.0, {}, {"engine compute": {"risk": "low", "cost": "1 h"}})
    assert [r["centre"] for r in rows] == ["engine compute", "engine front end", "client"]
    assert rows[0]["bound_gain_pct"] == pytest.approx(100 / 9)     # 2000 -> 1800 ms: bound +11.1%
    assert rows[1]["bound_gain_pct"] == 0 and rows[2]["bound_gain_pct"] == 0
    assert rows[1]["response_change_pct"] < rows[2]["response_change_pct"] < 0
    assert rows[0]["change"].startswith("smallest experiment that could disprove 'engine compute is the bottleneck'")
    assert rows[0]["risk"] == "low" and rows[1]["cost"] == "unknown"
    assert list(next_experiment_table(measured_demand_map("a", results(), VLLM_ENGINE, VLLM_LOG)).index) == [1, 2, 3]


@pytest.fixture
def avx2_copy(copy_committed_run, cold):
    """A run recorded before the per-point runtime evidence existed (the AVX2 host's quickstart)."""
    return cold(copy_committed_run("quickstart", "avx2-host"))


def test_a_run_recorded_before_the_runtime_evidence_reads_not_measured(avx2_copy):
    maps = measured_demand_maps(avx2_copy)
    assert set(maps) == {"llama-cpp", "vllm-cpu"}
    for d in maps.values():
        assert d.status.startswith("not measured: its results.json predates the per-point runtime evidence")
        assert not d.centres and d.bound_rps is None
    assert list(bound_table(maps)["status"].str.startswith("not measured")) == [True, True]
    assert plots.measured_demand_bars(maps) is None


def test_a_run_with_runtime_evidence_gets_a_map_per_arm(avx2_copy):
    run = avx2_copy
    for arm, roles in (("llama-cpp", {"llama_server": 3.0}), ("vllm-cpu", {"api_server": 0.5, "engine_core": 3.0})):
        path = run / "arms" / arm / "results.json"
        r = json.loads(path.read_text())
        for p in r["sweep"]["points"].values():
            scale = 1 / p["concurrency"] ** 0.5     # batching: less CPU per request at higher load
            p.update(cpu_seconds={"client": 0.1, "engine": {k: v * 12 * scale for k, v in roles.items()}},
                     requests_in_cpu_window=12, work_tokens={"prompt_tokens": 1536, "generated_tokens": 768,
                                                             "source": "engine counters"})
        path.write_text(json.dumps(r))
    maps = measured_demand_maps(run)
    llama, vllm = maps["llama-cpp"], maps["vllm-cpu"]
    assert llama.status == vllm.status == "measured" and llama.point == vllm.point == "c2-r0"
    assert [c.centre for c in llama.centres] == ["client", "engine compute"]   # one process: no front end apart
    assert "--threads 1" in llama.centres[1].why_m
    assert [c.centre for c in vllm.centres] == ["client", "engine front end", "engine compute"]
    assert vllm.bound_rps == pytest.approx(1000 / (3000 / 2 ** 0.5))
    assert vllm.measured_over_bound == pytest.approx(vllm.measured_saturation_rps / vllm.bound_rps)
    assert len(vllm.mva_check) == 4
    # c2's demands, set by hand here, put MVA at 10.4 s where 17.6 s was measured: a model that far from
    # its own point ranks nothing, and says so with both figures
    assert vllm.own_point_error_pct == pytest.approx(100 * (vllm.own_point_e2e_ms / 17566.0 - 1), abs=0.1)
    assert vllm.own_point_error_pct < -35
    assert vllm.next_experiments == [] and vllm.next_experiments_note.startswith(
        "no candidate is ranked: the model misses its own point, predicting 10,449 ms mean E2E at c2-r0 where "
        "17,566 ms was measured (-41%")
    json.loads(vllm.model_dump_json())   # stored in analysis.json as data
    assert plots.measured_demand_bars(maps) is not None and plots.mva_centres_check(maps) is not None


def test_seed_map_in_the_same_table_format():
    table = layers_table(demand_map(SEED_LAYERS))
    assert list(table["D/m (ms)"]) == [8.0, 12.0, 3.0, 13.0, 2.5]
    assert table["bottleneck"].sum() == 1 and table.loc["runtime", "bottleneck"]
    assert list(table.columns) == list(centres_table(measured_demand_map("a", results(), VLLM_ENGINE,
                                                                         VLLM_LOG)).columns)


def test_vllm_cpus_worker_process_is_the_compute_and_enginecore_the_scheduler():
    p = results()["sweep"]["points"]["c4-r0"]
    # as the CPU build records it: the model runs in VLLM::Worker, EngineCore schedules the steps
    p["cpu_seconds"]["engine"] = {"api_server": 1.2, "engine_core": 0.6, "worker": 24.0, "resource_tracker": 0.0}
    centres = {c.name: c for c in point_centres(p, VLLM_ENGINE, VLLM_LOG)}
    assert set(centres) == {"client", "engine front end", "engine scheduler", "engine compute"}
    assert centres["engine scheduler"].demand_ms == pytest.approx(50.0)   # 0.6 s / 12
    assert centres["engine compute"].demand_ms == pytest.approx(2000.0)   # 24 s / 12
    assert "worker process" in centres["engine compute"].source


def test_the_client_centre_has_one_core_per_client_process():
    point = dict(results()["sweep"]["points"]["c4-r0"])
    one = {c.name: c for c in point_centres(point, VLLM_ENGINE, VLLM_LOG)}["client"]
    two = {c.name: c for c in point_centres(point | {"client_processes": 2}, VLLM_ENGINE, VLLM_LOG)}["client"]
    assert (one.capacity, two.capacity) == (1.0, 2.0) and two.service_ms == one.service_ms
    assert two.adjusted_ms == one.adjusted_ms / 2 and "protocol.loadgen.processes" in two.why_m


# Real points: the committed reference runs' sweep points and engine launch, copied (without the
# engine's metric dumps) so the tests do not move when the runs are redone.
REFERENCE = json.loads((Path(__file__).parents[1] / "data" / "reference-demand-map-points.json").read_text())


def reference_map(key: str):
    ref = REFERENCE[key]
    return measured_demand_map(key, ref["results"], ref["engine"], "", "accepted", None, ref["slo"])


def test_the_bound_and_the_throughput_share_one_window_and_the_idle_sentence_its_busy_fractions():
    """Quickstart llama-cpp c=4: the bound from the CPU window (13 requests / 15.59 s of readings)
    beside the throughput over the same window (0.834 req/s, not the measured window's 0.669): the
    ratio is llama-server's busy fraction, 0.993, and the text says busy, not 'idle 20%'."""
    d = reference_map("quickstart/llama-cpp")
    assert d.status == "measured" and d.point == "c4-r0"
    assert d.measured_saturation_rps == pytest.approx(13 / 15.5912, rel=1e-6)
    assert d.measured_over_bound == pytest.approx(0.993, abs=1e-3)
    assert d.busy_fractions["engine compute"] == pytest.approx(0.993, abs=1e-3)
    assert d.why_not_closer.startswith("At c4-r0 (concurrency 4) the engine compute centre was busy 99% of the "
                                       "point's CPU window")
    assert "idle" not in d.why_not_closer


def test_a_map_whose_throughput_exceeds_its_bound_is_invalid_and_ranks_nothing():
    """Workloads llama-cpp: the demands at rate 2 (its highest load) bound it at 0.646 req/s, yet
    rate 1 ran 0.795 req/s over its own CPU window: 1.23x, beyond the 5% a single reading allows.
    The lognormal lengths differ by point, so the demands of one do not hold at the other."""
    d = reference_map("workloads/llama-cpp")
    assert not d.measured and d.status.startswith(
        "invalid: measured 0.795 req/s at rate1-r0 is 1.23x the bound 0.646 req/s, beyond its interval (±5%): "
        "the demands measured at rate2-r0 do not hold at rate1-r0")
    assert d.status.endswith("it ranks nothing") and d.next_experiments == []
    assert d.busy_fractions["engine compute"] == pytest.approx(1.002, abs=1e-3)  # its own point: the bound holds


def test_overlapping_cpu_seconds_are_named_when_a_process_outran_its_m():
    """A process busy 1.5 cores against m = 1 over the same window: the map is invalid, and says
    which assumption broke."""
    p = point(4, 0.6, 1.2, 24.0, 0.45, 8000.0, batch=3.2) | {"cpu_window_s": 10.667}  # 12 requests: 1.125 req/s
    d = measured_demand_map("x", {"sweep": {"points": {"c4-r0": p}, "load_validity": {}}}, VLLM_ENGINE, VLLM_LOG)
    assert d.busy_fractions["engine compute"] == pytest.approx(2.25, abs=1e-3)
    assert "overlapping CPU seconds: the engine compute process was busy 2.25 cores over the window against m = 1" \
        in d.status and d.next_experiments == []


def test_an_open_loop_arm_is_judged_at_its_offered_rate_not_as_a_count():
    """Burstiness, arrivals configured at 1.7 req/s whose schedule (in this fixture) offered 1.53:
    the sentence reads the 0.57 requests in flight (not '1.7 in flight'), and the model is an open
    network at the 1.53 req/s the schedule offered, not a closed one at N=1. That network (M/M/1 per
    centre: R = 338 / (1 - 1.53 x 0.338) + 7.9 = 708 ms) waits where constant arrivals barely queue
    (336 ms measured): it misses its own point by +110%, so it ranks nothing and says so."""
    d = reference_map("burstiness/constant")
    assert d.status == "measured" and d.offered_load == "offered 1.7 req/s (its seeded schedule 1.53)"
    assert "busy 57% of the point's CPU window, idle 43%" in d.why_not_closer
    assert ("0.57 requests were in flight on average" in d.why_not_closer
            and "1.7 were in flight" not in d.why_not_closer)
    assert d.load_model == "an open network at the 1.53 req/s its schedule offered"
    assert d.own_point_e2e_ms == pytest.approx(338.0 / (1 - 1.53 * 0.338) + 7.875 / (1 - 1.53 * 0.007875),
                                               rel=1e-4)
    assert d.own_point_error_pct == pytest.approx(110.4, abs=0.1)
    assert d.next_experiments == [] and d.next_experiments_note.startswith(
        "no candidate is ranked: the model misses its own point, predicting 708 ms mean E2E at rate1.7-r0 where "
        "336 ms was measured (+110%")
    top = next_experiments(d.layers(), None, 0.0, rate_rps=1.53)[0]   # the same centres' candidates, unfiltered
    assert top["centre"] == "engine compute" and top["at_load"] == "1.53 req/s offered"
    assert "N=" not in top["expected_gain"]


def test_the_open_network_response_by_hand():
    # D/m 200 ms at 2 req/s: U = 0.4, R = 200 / 0.6 = 333.3 ms; with a 50 ms delay, 383.3 ms
    assert open_response_ms([Layer("a", 1, 200.0)], 2.0, 50.0) == pytest.approx(383.333, rel=1e-5)
    assert open_response_ms([Layer("a", 1, 200.0)], 5.0) == float("inf")   # saturated


def committed_map(run: str, arm: str):
    from stackbook.analysis.demand_map import measured as m

    return next(d for d in m.measured_demand_maps(f"outputs/{run}").values() if d.arm == arm)


def test_the_engines_queue_is_blamed_only_where_its_own_counters_show_one():
    """quickstart vllm-cpu c4-r1: the batch gauge read 2.1 of 4 in flight, but vLLM's own counters
    read 0.012 ms of queue time and no request waiting, so the queue is ruled out (it was blamed
    before); workloads vllm-cpu at 2 req/s queued for seconds with 4.2 waiting, and is blamed."""
    quick = committed_map("quickstart/reference", "vllm-cpu")
    assert "not the engine's queue, whose own counters read 0.012 ms in its queue per request and 0 requests " \
           "waiting on average although it ran 2.1 requests at a time" in quick.why_not_closer
    assert "the engine's queue:" not in quick.why_not_closer
    busy = committed_map("workloads/reference", "vllm-cpu")
    assert "the engine's queue: it ran 3.0 requests at a time on average while 9.14 were in flight, and its own " \
           "counters read 3,549 ms in its queue per request and 4.2 requests waiting on average" in busy.why_not_closer
    # an engine that exports no queue counter: the queue stays the likely owner, and the sentence says so
    from stackbook.analysis.demand_map.measured import queue_owner

    assert queue_owner(1.0, 2.0, None, None, 500.0).startswith("likely the engine's queue")
    assert "exports no queue counter" in queue_owner(1.0, 2.0, None, None, 500.0)


def test_an_open_loop_experiment_is_predicted_at_the_rate_offered_not_at_the_throughput():
    """workloads vllm-cpu at 2 req/s (its seeded schedule offered 1.73) against a bound of 1.49:
    the queue grows without limit there, so no candidate keeps the mean E2E inside the SLO. Its
    next experiment used to be judged 'at 1.17 req/s offered', a throughput, and passed the filter."""
    d = committed_map("workloads/reference", "vllm-cpu")
    assert d.offered_load == "offered 2 req/s (its seeded schedule 1.73)"
    assert d.next_experiments == [] and "test a lighter load first" in d.next_experiments_note
    steady = committed_map("burstiness/reference", "poisson")
    assert steady.load_model == "an open network at the 1.56 req/s its schedule offered"


def test_the_compute_centre_is_read_from_the_arm_s_own_kind():
    """A process another kind calls its compute (vLLM's EngineCore) is not this arm's: a llama.cpp
    arm computes in llama-server, whatever else its process group holds."""
    p = results()["sweep"]["points"]["c4-r0"]
    p["cpu_seconds"]["engine"] = {"llama_server": 20.0, "engine_core": 2.0}
    llama = {"kind": "llama_cpp", "launch": {"command": ["llama-server", "--threads", "1"]}}
    centres = {c.name: c for c in point_centres(p, llama, "")}
    assert centres["engine compute"].demand_ms == pytest.approx(20.0 / 12 * 1000)  # 20 s / 12 requests
    assert "llama_server process" in centres["engine compute"].source and "engine scheduler" not in centres
    vllm = {c.name: c for c in point_centres(p | {"cpu_seconds": {"client": 0.6, "engine": {"engine_core": 3.0}}},
                                             VLLM_ENGINE | {"kind": "vllm_cpu"}, VLLM_LOG)}
    assert "engine_core process" in vllm["engine compute"].source  # no worker: EngineCore computes itself


def test_llama_server_s_http_threads_read_apart_are_its_front_end():
    """Where llama-server's HTTP threads were read apart (llama_server.http), their seconds are the
    front end's (host execution) and no longer the compute's; the layers say host measured on both
    sides and the runtime still inside the compute, with the engine's own batch gauge."""
    p = results()["sweep"]["points"]["c4-r0"]
    p["cpu_seconds"]["engine"] = {"llama_server": 20.0, "llama_server.http": 0.03}
    llama = {"kind": "llama_cpp", "launch": {"command": ["llama-server", "--threads", "1"]}}
    centres = {c.name: c for c in point_centres(p, llama, "")}
    assert centres["engine front end"].demand_ms == pytest.approx(0.03 / 12 * 1000)  # 2.5 ms a request
    assert centres["engine compute"].demand_ms == pytest.approx(20.0 / 12 * 1000)
    assert "less its HTTP threads" in centres["engine compute"].source
    assert "HTTP threads" in centres["engine front end"].source
    from stackbook.analysis.demand_map.measured import ArmDemandMap, _rows
    from stackbook.analysis.demand_map.stack_layers import layer_rows

    dmap = ArmDemandMap(arm="llama-cpp", status="measured", point="c4-r0", centres=_rows(list(centres.values())),
                        bottleneck="engine compute", batch_size_mean=3.2)
    rows = {r["layer"]: r for r in layer_rows(dmap)}
    assert rows["host execution"]["centres"] == "client, engine front end" and rows["host execution"]["note"] == ""
    assert rows["runtime"]["D (ms/request)"] is None
    assert rows["runtime"]["note"].endswith(
        "its own gauge read 3.20 requests in progress on average (its batch) at c4-r0")


def test_llama_server_s_loop_split_by_its_own_clock_gives_runtime_and_kernel_rows():
    """Where the point carries the engine's loop timings (measure.slot_loop), the runtime row is the
    loop's share outside decode of the main thread's seconds, the kernels row the compute centre
    less it; the two sum to the compute centre, which stays one centre of the network."""
    p = results()["sweep"]["points"]["c4-r0"]
    p["cpu_seconds"]["engine"] = {"llama_server": 20.0, "llama_server.http": 0.03}
    llama = {"kind": "llama_cpp", "launch": {"command": ["llama-server", "--threads", "2"]}}
    centres = list(point_centres(p, llama, ""))
    from stackbook.analysis.demand_map.measured import ArmDemandMap, _rows
    from stackbook.analysis.demand_map.stack_layers import layer_rows

    loop = {"passes": 400, "pre_decode_ms": 300.0, "decode_ms": 9000.0, "post_decode_ms": 700.0,
            "runtime_share": 0.1, "main_thread_s": 12.0, "runtime_s": 1.2, "requests": 12, "source": "x"}
    dmap = ArmDemandMap(arm="llama-cpp", status="measured", point="c4-r0", centres=_rows(centres),
                        bottleneck="engine compute", slot_loop=loop)
    rows = {r["layer"]: r for r in layer_rows(dmap)}
    assert rows["runtime"]["D (ms/request)"] == pytest.approx(100.0)  # 1.2 s / 12 requests
    assert rows["runtime"]["D/m (ms)"] == pytest.approx(100.0)  # the loop runs on one thread
    compute = 20.0 / 12 * 1000
    assert rows["kernels"]["D (ms/request)"] == pytest.approx(compute - 100.0)
    assert rows["kernels"]["D/m (ms)"] == pytest.approx((compute - 100.0) / 2)  # decode on both threads
    assert "10.0% of its slot loop" in rows["runtime"]["note"] and rows["runtime"]["bottleneck"]
    assert rows["host execution"]["centres"] == "client, engine front end"
    assert [c.name for c in centres].count("engine compute") == 1  # the split adds no queue
    without = {r["layer"]: r for r in layer_rows(dmap.model_copy(update={"slot_loop": None}))}
    assert without["runtime"]["D (ms/request)"] is None
