"""The engine's slot-loop timings read from its log: blocks parsed whatever lines fall between
theirs, totals as mean x passes, and a point's split of the main thread's seconds between the
runtime (the loop outside decode) and the kernels."""
import pytest

from stackbook.measure.slot_loop import (
    LoopTotals,
    blocks_since,
    log_size,
    main_thread_seconds,
    parse_blocks,
    slot_loop_window,
)


def block(passes: int, pre: str, decode: str, post: str, between: str = "") -> str:
    """One timing block as the cached llama-server (DEBUG_TIMINGS) logs it, timestamps and all."""
    return (f"0.05.649.903 I srv  update_slots: n_pre_decode      = {passes}\n"
            f"0.05.649.932 I srv  update_slots: avg t_pre_decode  = {pre} ms\n{between}"
            f"0.05.649.935 I srv  update_slots: avg t_decode      = {decode} ms\n"
            f"0.05.649.936 I srv  update_slots: avg t_post_decode = {post} ms\n"
            "0.05.649.937 I srv  update_slots: avg t_sampl       = 0.164269 ms\n")


LOG = ("main: server is listening on http://127.0.0.1:8080\n"
       + block(0, "-nan", "nan", "-nan")
       + "slot launch_slot_: id  0 | task 0 | processing task\n"
       + block(100, "0.500000", "20.000000", "1.500000", between="srv  log_server_r: request: POST /v1/completions\n")
       + block(300, "0.400000", "19.000000", "1.600000")
       + "srv  update_slots: n_pre_decode      = 400\nsrv  update_slots: avg t_pre_decode  = 0.4 ms\n")  # cut off


def test_blocks_are_parsed_with_other_lines_between_and_a_cut_one_left_out():
    blocks = parse_blocks(LOG)
    assert blocks == [LoopTotals(0, 0.0, 0.0, 0.0), LoopTotals(100, 50.0, 2000.0, 150.0),
                      LoopTotals(300, pytest.approx(120.0), pytest.approx(5700.0), pytest.approx(480.0))]


def test_a_point_s_runtime_is_the_loop_s_share_outside_decode_of_the_main_thread():
    blocks = parse_blocks(LOG)[1:]
    w = slot_loop_window(blocks, main_thread_s=4.0, requests=8, source="the engine's loop timings")
    assert w["passes"] == 200
    assert (w["pre_decode_ms"], w["decode_ms"], w["post_decode_ms"]) == (70.0, 3700.0, 330.0)
    assert w["runtime_share"] == pytest.approx(400 / 4100, abs=1e-5)
    assert w["runtime_s"] == pytest.approx(4.0 * 400 / 4100, abs=1e-4)
    assert w["requests"] == 8 and w["source"] == "the engine's loop timings"


def test_no_split_from_fewer_than_two_blocks_or_no_main_thread_reading():
    blocks = parse_blocks(LOG)
    assert slot_loop_window(blocks[:1], 4.0, 8) is None  # a point shorter than the engine's 5 s
    assert slot_loop_window(blocks, None, 8) is None
    assert slot_loop_window([blocks[1], blocks[1]], 4.0, 8) is None  # no pass between them


def test_the_log_is_read_after_the_point_s_start(tmp_path):
    log = tmp_path / "engine.log"
    log.write_text(block(100, "0.5", "20", "1.5"))
    start = log_size(log)
    with open(log, "a") as f:
        f.write(block(300, "0.4", "19", "1.6") + block(350, "0.4", "19", "1.6"))
    assert [b.passes for b in blocks_since(log, start)] == [300, 350]
    assert log_size(tmp_path / "absent.log") is None and blocks_since(None, 0) == []


def test_main_thread_seconds_between_two_readings():
    before = {"engine": {7: {"cpu_s": 1.0, "main_thread_s": 0.5}}}
    after = {"engine": {7: {"cpu_s": 3.0, "main_thread_s": 2.0}, "7.http": {"cpu_s": 0.1}}}
    assert main_thread_seconds(before, after) == pytest.approx(1.5)
    assert main_thread_seconds(before, {"engine": {7: {"cpu_s": 3.0}}}) is None


def test_a_point_window_reads_the_arm_s_log_when_its_adapter_has_none(tmp_path):
    """The sweep runs in a notebook whose adapter is attached to the runner's engine and holds no
    log of its own: the window reads the arm's engine log, where the runner writes the engine's
    output, and the main thread of the engine's process (a real child here)."""
    import subprocess
    import sys
    import time
    from types import SimpleNamespace

    from stackbook.engines.facts import ProcessRole
    from stackbook.measure.sweep_point import EngineWindow

    child = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\n"
                              "while time.process_time() - t < 30: pass"], start_new_session=True)
    try:
        rule = ProcessRole(pattern="python", role="server", centre="compute", serves_http=True,
                           http_threads_born_within_s=0.1)
        log = tmp_path / "engine.log"
        log.write_text(block(100, "0.5", "20", "1.5"))  # before the point: not its own
        adapter = SimpleNamespace(process_roles=(rule,), step_timings_source="the engine's loop timings",
                                  log_path=None, metrics_path=None)
        session = SimpleNamespace(adapter=adapter, routing=None, arm_dir=SimpleNamespace(engine_log=log))
        began = time.monotonic()
        with EngineWindow(session, SimpleNamespace(base_url="http://127.0.0.1:9", headers={}), child.pid) as w:
            with open(log, "a") as f:
                f.write(block(200, "0.5", "20", "1.5") + block(300, "0.5", "20", "1.5"))
            time.sleep(0.5)
        elapsed = time.monotonic() - began
        loop = w.slot_loop(requests=4)
    finally:
        child.kill()
        child.wait()
    assert loop["passes"] == 100 and loop["decode_ms"] == pytest.approx(2000.0)
    assert loop["runtime_share"] == pytest.approx(200 / 2200, abs=1e-5)
    assert 0 < loop["main_thread_s"] <= elapsed + 0.05  # the child's busy main thread, at most one core
    assert loop["source"] == "the engine's loop timings"
