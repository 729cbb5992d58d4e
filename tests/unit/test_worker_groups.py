"""make test's two workers: the modules that run engines form one group, every other module its own."""
from stackbook.locations import REPO_ROOT

from tests.support.worker_groups import ENGINE_GROUP, scope_of


def test_modules_that_run_engines_share_one_group_and_others_stay_whole():
    for nodeid in ("tests/engines/test_gate.py::test_x", "tests/chaos/test_chaos.py::test_y[a::b]",
                   "tests/notebooks/test_notebooks.py::test_z"):
        assert scope_of(nodeid, REPO_ROOT) == ENGINE_GROUP, nodeid
    assert scope_of("tests/unit/measure/test_threads.py::test_a", REPO_ROOT) == "tests/unit/measure/test_threads.py"
    assert scope_of("tests/notebooks/test_first_screens.py::test_b[q/r]", REPO_ROOT) \
        == "tests/notebooks/test_first_screens.py"


def test_every_module_under_tests_engines_is_in_the_engine_group():
    modules = sorted((REPO_ROOT / "tests" / "engines").glob("test_*.py"))
    assert len(modules) >= 10
    outside = [m.name for m in modules if scope_of(f"tests/engines/{m.name}::t", REPO_ROOT) != ENGINE_GROUP]
    assert outside == []
