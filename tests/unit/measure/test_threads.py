"""An engine process's threads told apart by their birth: those born with the process (an HTTP
pool started before the model loads) against those born later (the compute's), each with the CPU
seconds it ran, read from /proc on a real process."""
import subprocess
import sys
import time

import pytest

from stackbook.engines.facts import ProcessRole
from stackbook.measure.runtime import process_window, read_processes
from stackbook.measure.threads import ThreadTime, http_threads, thread_times

# A child that starts one busy thread at once and another two seconds later; each then waits. The
# gap leaves a loaded host's interpreter start-up (before the first thread) well inside 1.5 s.
CHILD = """
import threading, time
def burn(s):
    t = time.thread_time()
    while time.thread_time() - t < s: pass
    threading.Event().wait(30)
threading.Thread(target=burn, args=(0.2,)).start()
time.sleep(2.0)
threading.Thread(target=burn, args=(0.3,)).start()
time.sleep(0.01)
threading.Event().wait(30)
"""

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_http_threads_are_those_born_with_the_process_but_its_main_one():
    threads = [ThreadTime(10, 0.0, 5.0), ThreadTime(11, 0.01, 0.002), ThreadTime(12, 0.33, 4.9)]
    assert http_threads(threads, 10, 0.1) == [ThreadTime(11, 0.01, 0.002)]


def test_read_processes_moves_early_threads_seconds_to_their_own_role():
    p = subprocess.Popen([sys.executable, "-c", CHILD], start_new_session=True)
    try:
        assert thread_times(2**22 + 7) is None  # no such process
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until both threads have burned and wait (a loaded host is slower)
            threads = sorted((t for t in thread_times(p.pid) if t.tid != p.pid), key=lambda t: t.born_after_s)
            if len(threads) == 2 and threads[0].run_s >= 0.2 and threads[1].run_s >= 0.3:
                break
            time.sleep(0.2)
        early, late = threads
        assert early.born_after_s < 1.5 <= late.born_after_s
        assert early.run_s >= 0.18 and late.run_s >= 0.28
        rule = ProcessRole(pattern="python", role="server", centre="compute", serves_http=True,
                           http_threads_born_within_s=1.5)
        before = {"client": {"cpu_s": 0.0}, "engine": {}}
        after = read_processes(p.pid, (rule,))
        assert after["engine"][f"{p.pid}.http"]["role"] == "server.http"
        assert after["engine"][f"{p.pid}.http"]["threads"] == 1
        w = process_window(before, after)["cpu_seconds"]["engine"]
        assert w["server.http"] == pytest.approx(early.run_s, abs=0.02)
        assert w["server"] >= 0.28 and w["server"] + w["server.http"] >= 0.46
        main = after["engine"][p.pid]["main_thread_s"]  # kept for the engine's loop split (measure.slot_loop)
        assert 0 < main and main + late.run_s == pytest.approx(w["server"], abs=0.02)  # the rest is the late one
    finally:
        p.kill()
        p.wait()
