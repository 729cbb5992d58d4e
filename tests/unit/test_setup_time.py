"""The set-up benchmarks read each step's second from a stamped log: the .venv's first part (what the
engine step imports), the moment the engine step begins, and the rest of the .venv beside it."""
import sys

from stackbook.locations import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
import first_answer  # noqa: E402
import setup_time  # noqa: E402

B = "\x1b[1m[setup]\x1b[0m"
T0 = 1796678000  # an epoch second: the benchmarks stamp each line with the second it arrived
ROWS = [(0, ""),
        (0, f"{B} host: AMD EPYC (2 logical CPUs, x86_64); instruction sets: avx avx2"),
        (0, f"{B} workbook environment (.venv): installing what the engine step needs first (log: x)"),
        (8, f"{B} workbook environment (.venv): the engine step's packages in 8 s; the rest installs beside it"),
        (8, f"{B} workbook environment (.venv): installing stackbook and its dependencies (log: x)"),
        (9, f"{B} engines: llama-server build, vLLM and MLX installs run in parallel; progress in x"),
        (185, f"{B} workbook environment (.venv): ready in 176 s"),
        (330, "[setup] embedded model smollm2-135m-instruct: ready in 29 s (x)"),
        (331, "make exited 0")]


def stamped(rows) -> str:
    return "".join(f"{T0 + t} {line}".rstrip() + "\n" for t, line in rows)


LOG = stamped(ROWS)


def test_the_set_up_steps_are_read_from_their_lines():
    assert setup_time.read_log(LOG) == {"whole_s": 331, "engines_begin_s": 9, "setup_needs_s": 8, "venv_s": 176}


def test_a_set_up_of_one_part_reads_without_the_first_part():
    old = stamped([(t, line) for t, line in ROWS if "engine step" not in line])
    assert setup_time.read_log(old)["setup_needs_s"] is None


def test_the_first_answer_records_the_first_part_where_the_set_up_has_it():
    run = stamped([*ROWS[:-1], (331, "outputs/quickstart/20261207T185140Z"), (400, "make exited 0")])
    assert first_answer.read_log(run) == {"whole_s": 400, "setup_s": 330, "venv_s": 176, "setup_needs_s": 8,
                                          "run": "outputs/quickstart/20261207T185140Z"}
