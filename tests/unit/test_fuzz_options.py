"""Every command's options and arguments given generated bad values (paths that are not runs or
files, unicode, control characters, out-of-range and non-numeric numbers, unknown names): no
traceback, a non-zero exit for every refusal, and the refusal names the option, the argument or
the value it is about. Only invocations that cannot start an engine, a browser or a notebook
are generated (`run` always with --check); `size` is fuzzed with the sizing options."""
import os
import re
from unittest import mock

import typer.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from stackbook.cli import app
from typer.main import get_command
from typer.testing import CliRunner

COMMAND = get_command(app)
CASES = int(os.environ.get("STACKBOOK_FUZZ_CASES", 2000)) // 2
REFERENCE = "outputs/quickstart/reference"  # a real run: only ever given with a wrong arm or notebook


def invoke(args: list[str]):
    """The command line in-process, its click command built once (typer rebuilds it per invoke)."""
    with mock.patch.object(typer.testing, "_get_command", lambda a: COMMAND if a is app else get_command(a)):
        return CliRunner().invoke(app, args)


TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
WORDS = st.sampled_from(["", " ", "-", "--", "-1", "0", "1e309", "nan", "\u202e\u0627\u0628", "\U0001f4a5", "..",
                         "../../etc/passwd", "a" * 300, "--json", "x=1", "=", "==", "\t", "\x00", "NUL\x00byte"])
NOT_A_RUN = st.one_of(TEXT.map(lambda t: f"/nonexistent/{t}"), WORDS,
                      st.sampled_from([".", "/", "lib", "outputs", "outputs/quickstart", "campaigns", "README.md",
                                       "campaigns/quickstart.yaml", "/dev/null", "/proc/self"]))
NAME = st.one_of(TEXT, WORDS).filter(lambda s: s not in ("llama-cpp", "vllm-cpu"))
BAD_INT = st.one_of(st.integers(max_value=0), st.integers(min_value=65, max_value=2**80).map(str),
                    TEXT.filter(lambda t: not t.strip().lstrip("+-").isdigit()), WORDS)


def opts(**options) -> st.SearchStrategy[list[str]]:
    """Some of these options, each with a drawn value, flattened into arguments."""
    pairs = [st.tuples(st.just(name), value) for name, value in options.items()]
    return st.lists(st.one_of(*pairs), max_size=3).map(lambda ps: [str(x) for p in ps for x in p])


INVOCATIONS = st.one_of(
    st.tuples(st.just(["run", "--check"]),
              st.one_of(NOT_A_RUN, st.just("campaigns/quickstart.yaml")).map(lambda p: [p]),
              opts(**{"--run-id": NAME, "--arm": NAME, "--executor": st.one_of(NAME, st.just("ray")),
                      "--ray-address": NAME, "--resume": NOT_A_RUN})),
    st.tuples(st.just(["run"]), st.just([]), opts(**{"--resume": NOT_A_RUN, "--run-id": NAME})),
    st.tuples(st.just(["demand"]), st.just([]), opts(**{"--example": NAME})),
    st.tuples(st.just(["selftest"]), st.just([]), st.lists(BAD_INT, min_size=1, max_size=1).map(
        lambda v: ["--processes", str(v[0])])),
    st.tuples(st.just(["replay"]), NOT_A_RUN.map(lambda p: [p]),
              opts(**{"--arm": NAME, "--point": NAME, "--endpoint": NAME, "--run-id": NAME})),
    st.tuples(st.just(["replay", REFERENCE]), st.just([]), NAME.map(lambda a: ["--arm", a])),
    st.tuples(st.just(["schema"]), NAME.map(lambda k: [k]), st.just([])),
    st.tuples(st.just(["report"]), NOT_A_RUN.map(lambda p: [p]), st.just([])),
    st.tuples(st.just(["attach"]), st.tuples(NOT_A_RUN, NAME).map(list), opts(**{"-p": NAME, "--note": NAME})),
    st.tuples(st.just(["attach", REFERENCE]), NAME.map(lambda n: [n]), st.just([])),
    st.tuples(st.just(["attach", REFERENCE, "50_demand_map"]), st.just([]),
              st.one_of(NAME.filter(lambda s: not s.partition("=")[0].strip() or "=" not in s),
                        st.sampled_from(["x=[", "x={a", 'x="', "x=- - [", "x=\t@"])).map(lambda p: ["-p", p])),
    st.tuples(st.just(["compare"]), st.lists(NOT_A_RUN, max_size=3), opts(**{"--out": NAME})),
    st.tuples(st.just(["screenshot"]), st.tuples(NOT_A_RUN.filter(lambda p: not os.path.isfile(p)), NAME).map(list),
              opts(**{"--height": BAD_INT, "--width": BAD_INT, "--from-id": NAME})),
    st.tuples(st.just([]), st.lists(NAME, min_size=1, max_size=2), st.just([])),   # no such command
).map(lambda t: t[0] + t[1] + t[2])


def named(output: str, args: list[str]) -> bool:
    """The refusal names what it refuses: an option or argument of the command, or a value given."""
    if re.search(r"--[a-z][a-z-]+|'-p'|\b[A-Z_]{3,}\b|No such command|Missing (argument|option)|Got unexpected",
                 output):
        return True
    if re.match(r"\S+: ", output):  # led by the path as the command read it ('' reads as '.')
        return True
    flat = " ".join(output.split())
    given = [v for a in args if a for v in (a, repr(a), " ".join(a.split()), os.path.normpath(a))]
    return any(v in output or v in flat for v in given)


@settings(max_examples=CASES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(args=INVOCATIONS)
def test_bad_options_end_in_a_refusal_that_names_them(args):
    r = invoke(args)
    assert r.exception is None or isinstance(r.exception, SystemExit), f"{args}: {r.output}{r.exception!r}"
    assert "Traceback" not in r.output, args
    if r.exit_code == 0:  # a value the command accepts: only the printing commands, and --check
        assert args[0] in ("schema", "demand", "run") and (args[0] != "run" or "--check" in args), args
        return
    assert r.exit_code in (1, 2), (args, r.exit_code, r.output)
    assert r.output.strip() and named(r.output, args), (args, r.output)
