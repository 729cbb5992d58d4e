"""The cached llama-server logs its slot loop by its own clock (built with DEBUG_TIMINGS), and a
point's stretch of that log splits the main thread's seconds between the runtime (the loop
outside decode) and the kernels: read from a real server kept busy past two of its 5-second
timing blocks."""
import subprocess
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from stackbook.engines import adapter_class
from stackbook.engines.spec import free_port
from stackbook.measure.runtime import read_processes
from stackbook.measure.slot_loop import blocks_since, log_size, main_thread_seconds, slot_loop_window

pytestmark = pytest.mark.engine

BODY = b'{"prompt": "Tell me a story about a cat and a dog who met in a garden.", "max_tokens": 16}'


def complete(url: str) -> None:
    req = urllib.request.Request(f"{url}/v1/completions", BODY, {"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=120).read()


def test_a_busy_stretch_of_the_log_splits_the_loop_into_runtime_and_kernels(real_engines, tmp_path):
    adapter = adapter_class("llama_cpp")
    port = free_port("127.0.0.1")
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "llama-server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(adapter.installed_executable()), "-m", str(real_engines.gguf), "--host",
                                 "127.0.0.1", "--port", str(port), "-t", "1", "-np", "2", "-c", "1024"],
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        for _ in range(240):
            assert proc.poll() is None, log.read_text()[-2000:]
            try:
                urllib.request.urlopen(f"{url}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.25)
        complete(url)  # its first pass logs a block; the point starts after it
        time.sleep(0.5)
        start, before = log_size(log), read_processes(proc.pid, adapter.process_roles)
        sent, began = 0, time.monotonic()
        with ThreadPoolExecutor(2) as pool:
            while time.monotonic() - began < 11.5 or sent < 4:  # past two 5-second blocks while busy
                list(pool.map(complete, [url, url]))
                sent += 2
        after = read_processes(proc.pid, adapter.process_roles)
        blocks = blocks_since(log, start)
        main_s = main_thread_seconds(before, after)
        window = slot_loop_window(blocks, main_s, sent, adapter.step_timings_source)
    finally:
        proc.kill()
        proc.wait()
    assert len(blocks) >= 2, log.read_text()[-3000:]
    assert blocks[-1].passes > blocks[0].passes > 0
    assert main_s > 0 and window is not None
    assert window["decode_ms"] > window["pre_decode_ms"] + window["post_decode_ms"] > 0  # kernels lead here
    assert 0 < window["runtime_share"] < 0.5 and 0 < window["runtime_s"] < main_s
    assert window["passes"] == blocks[-1].passes - blocks[0].passes and "DEBUG_TIMINGS" in window["source"]
