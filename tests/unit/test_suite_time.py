"""benchmarks/suite_time.py reads a CI log's figures, appends them with the host, and refuses a log
without them."""
import json
import subprocess
import sys

from stackbook.locations import REPO_ROOT

SCRIPT = str(REPO_ROOT / "benchmarks" / "suite_time.py")
LOG = """........ [100%]
============================= slowest 10 durations =============================
155.58s setup    tests/engines/test_end_to_end.py::test_run_directory_is_complete
49.39s call     tests/engines/test_faults.py::test_runner_interrupted[SIGINT]
2 failed, 1526 passed, 10 warnings, 1 error in 1507.70s (0:25:07)

real	26m48.971s
user	29m23.960s
"""


def record(tmp_path, log: str, *extra):
    (tmp_path / "ci.log").write_text(log)
    out = tmp_path / "suite_time.json"
    r = subprocess.run([sys.executable, SCRIPT, str(tmp_path / "ci.log"), "--commit", "abc1234", "--out", str(out),
                        *extra], capture_output=True, text=True, timeout=60)
    return r, out


def test_a_log_is_read_and_appended_with_the_host(tmp_path):
    for _ in range(2):
        r, out = record(tmp_path, LOG, "--workers", "2")
        assert r.returncode == 0, r.stderr
    runs = json.loads(out.read_text())["runs"]
    assert len(runs) == 2
    run = runs[-1]
    assert (run["tests_s"], run["whole_s"], run["passed"], run["failed"], run["errors"]) == (1507.7, 1609.0, 1526, 2, 1)
    assert run["workers"] == 2 and run["commit"] == "abc1234" and run["host"]["cpus"] >= 1
    assert run["slowest"][0] == {"s": 155.58, "phase": "setup",
                                 "test": "tests/engines/test_end_to_end.py::test_run_directory_is_complete"}
    assert run["slowest"][1]["test"].endswith("[SIGINT]")


def test_a_log_without_time_is_refused_with_the_fix(tmp_path):
    r, out = record(tmp_path, LOG.split("\nreal")[0], "--workers", "2")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "run the CI under `time`" in r.stderr and not out.exists()
