"""The sweep notebook's per-request statistics: one column per load level, in load order."""
from stackbook.config.loading import parse_campaign
from stackbook.measure.metrics import requests_frame
from stackbook.measure.sweep import load_levels, point_name
from stackbook.steps.sweep import request_stats_by_load, sweep_summary

from tests.support.calibration import endpoint_campaign
from tests.support.records import request_record


def protocol(arrival: dict):
    return parse_campaign({
        "name": "t", "arms": [{"name": "a", "engine": {"kind": "llama_cpp"}}],
        "protocol": {"workload": {"kind": "synthetic", "prompt_tokens": 64, "output_tokens": 16},
                     "arrival": arrival}}).protocol


def rec(point: str, repetition: int, concurrency: int, i: int, e2e_s: float, phase: str = "measure"):
    return request_record(point=point, phase=phase, repetition=repetition, concurrency=concurrency, request_index=i,
                          first_token_s=0.1, end_s=e2e_s, prompt_tokens_client=64, output_tokens_server=16,
                          output_tokens_requested=16)


def records_for(levels, e2e_by_level: dict, repetitions=(0,), concurrency=lambda lv: lv.get("concurrency", 0)):
    out = []
    for lv in levels:
        for r in repetitions:
            p = point_name(lv, r)
            out.append(rec(p, r, concurrency(lv), 0, 9.0, phase="warmup"))  # excluded from the statistics
            out += [rec(p, r, concurrency(lv), i, e2e) for i, e2e in enumerate(e2e_by_level[lv["level"]])]
    return requests_frame(out)


def test_open_loop_rates_each_get_their_own_column_in_rate_order():
    levels = load_levels(protocol({"kind": "poisson", "rates": [2, 0.5]}))
    frame = records_for(levels, {"rate2": [0.3, 0.5, 0.7], "rate0.5": [0.2, 0.4]})
    assert set(frame["concurrency"]) == {0}  # what the old grouping keyed on: one lump
    stats = request_stats_by_load(frame, levels)
    assert list(stats.columns) == ["rate0.5", "rate2"]
    assert stats.loc[("e2e_ms", "count"), "rate0.5"] == 2
    assert stats.loc[("e2e_ms", "mean"), "rate0.5"] == 300.0
    assert stats.loc[("e2e_ms", "count"), "rate2"] == 3
    assert stats.loc[("e2e_ms", "max"), "rate2"] == 700.0


def test_closed_loop_gets_one_column_per_concurrency_with_repetitions_pooled():
    levels = load_levels(protocol({"kind": "closed_loop", "concurrency": [4, 1]}))
    frame = records_for(levels, {"c1": [0.2], "c4": [0.6, 1.0]}, repetitions=(0, 1))
    stats = request_stats_by_load(frame, levels)
    assert list(stats.columns) == ["c1", "c4"]
    assert stats.loc[("e2e_ms", "count"), "c1"] == 2
    assert stats.loc[("e2e_ms", "count"), "c4"] == 4
    assert stats.loc[("e2e_ms", "mean"), "c4"] == 800.0
    assert stats.loc[("output_tokens", "mean"), "c4"] == 16.0
    assert stats.loc[("ttft_ms", "max"), "c4"] == 100.0


def test_no_measured_request_gives_an_empty_table():
    levels = load_levels(protocol({"kind": "closed_loop", "concurrency": [1]}))
    frame = records_for(levels, {"c1": []})
    assert request_stats_by_load(frame, levels).empty


def test_sweep_summary_line():
    line = sweep_summary({"label": "HOLD", "peak_engine_rss_gib": 1.5, "error_counts": {"timeout": 2}})
    assert line == "Label: **HOLD** · peak engine memory 1.5 GiB · errors {'timeout': 2}"


def test_a_sweep_from_two_client_processes_merges_their_records(tmp_path, start_calibration_server,
                                                                write_campaign):
    """An endpoint arm on the calibration server, each rate sent by two client processes: the
    arm's own files hold every request once, the points are judged over the merged records and
    say how many processes sent them and what each spent."""
    from stackbook.evidence.files import read_json
    from stackbook.loadgen.records import read_records
    from stackbook.loadgen.sent import read_sent
    from stackbook.measure.validity import CLIENT_CPU_NEAR_CORE, rate_held
    from stackbook.steps.session import open_arm
    from stackbook.steps.sweep import arm_sweep

    server = start_calibration_server()
    campaign = write_campaign(endpoint_campaign(
        server.base_url, model="{name: calibration, source: remote}", arrival="{kind: constant, rates: [40, 20]}",
        requests_per_point=24, warmup_requests=2, processes=2))
    session = open_arm(str(campaign), run_dir=str(tmp_path / "run"), start_engine=True)
    try:
        out = arm_sweep(session, progress=False)
    finally:
        session.close()
    arm = session.arm_dir
    assert not arm.client_parts.exists()
    records = read_records(arm.requests)
    for rate in (40, 20):
        point = f"rate{rate}-r0"
        mine = [r for r in records if r.point == point]
        indices = sorted(r.request_index for r in mine if r.phase != "sentinel")
        assert indices == list(range(len(indices))) and sum(r.phase == "measure" for r in mine) == 24
        p = out["points"][point]
        assert p["client_processes"] == 2 and len(p["client_cpu_fraction_by_process"]) == 2
        assert p["client_cpu_fraction"] == max(p["client_cpu_fraction_by_process"]) > 0
        # judged over the merged records, by the open loop's rule (whether this host kept the
        # schedule is its own business: no assertion on the timing itself)
        v = out["load_validity"][point]
        assert (v["achieved_rate_rps"], v["scheduled_rate_rps"]) == (p["achieved_rate_rps"], p["scheduled_rate_rps"])
        assert v["valid"] is rate_held(p["schedule_lag_ms_p99"], p["scheduled_rate_rps"], p["achieved_rate_rps"])
        assert p["cpu_seconds"]["client"] >= sum(p["client_cpu_fraction_by_process"]) * p["window_s"] * 0.5
    assert len(read_sent(arm.requests_sent)) == len(records)
    # a warning is kept only for a point whose busiest process passed the limit (a busy host can)
    busy = {f"rate{r}-r0" for r in (40, 20)
            if out["points"][f"rate{r}-r0"]["client_cpu_fraction"] >= CLIENT_CPU_NEAR_CORE}
    assert len(read_json(arm.results)["sweep"]["client_warnings"]) == len(busy)


def test_the_client_table_and_its_note():
    from stackbook.steps.sweep import client_note, client_table
    sweep = {"points": {"rate800-r0": {"client_processes": 2, "client_cpu_fraction": 0.91,
                                       "client_cpu_fraction_by_process": [0.91, 0.88]},
                        "rate100-r0": {}},
             "client_warnings": ["point rate800-r0: the busiest client process used 91% of a CPU core; ..."]}
    t = client_table(sweep)
    assert t.loc["rate800-r0", "each process"] == "0.91, 0.88" and t.loc["rate800-r0", "client processes"] == 2
    assert client_note(sweep) == ("- **Client near one core**: point rate800-r0: the busiest client process used 91% "
                                  "of a CPU core; ...")
    assert client_note({"points": {}}).startswith("No client process neared a full core (limit 80%)")
