"""The adapter is four concerns, each in its own module with its own small interface: the kind's
facts, its install recipe, its request dialect, and the process handle it holds. They declare
disjoint members, and the process handle really runs, logs and stops a process on its own."""
import sys
import time

from stackbook.engines.base import EngineAdapter
from stackbook.engines.engine_process import EngineProcess
from stackbook.engines.facts import EngineKindFacts
from stackbook.engines.install_recipe import InstallRecipe
from stackbook.engines.registry import ADAPTERS
from stackbook.engines.request_dialect import RequestDialect


def declared(cls) -> set[str]:
    return {n for n in vars(cls) if not n.startswith("_")} | set(getattr(cls, "__annotations__", {}))


def test_the_concerns_declare_disjoint_members():
    concerns = {c.__name__: declared(c) - {"kind"}
                for c in (EngineKindFacts, InstallRecipe, RequestDialect, EngineProcess)}
    names = list(concerns)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not concerns[a] & concerns[b], (a, b, concerns[a] & concerns[b])


def test_what_set_up_and_the_fairness_check_call_is_declared_on_every_adapter():
    # set-up calls is_installed() and install(ctx); fairness reads fields_not_sent
    for name in ("install", "is_installed", "fields_not_sent", "install_hint", "sampling_fields"):
        assert hasattr(EngineAdapter, name), name
    for kind, cls in ADAPTERS.items():
        assert issubclass(cls, (RequestDialect, InstallRecipe, EngineKindFacts)), kind
        if cls.bootstrap_step is None:
            assert cls.is_installed() is False, kind


def test_the_process_handle_logs_and_stops_its_own_process(tmp_path):
    log = tmp_path / "engine.log"
    handle = EngineProcess(log)
    handle.start([sys.executable, "-u", "-c", "import time; print('listening on 4242'); time.sleep(60)"], {}, None)
    deadline = time.monotonic() + 30
    while handle.find_in_log(r"listening on (\d+)") is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert handle.find_in_log(r"listening on (\d+)").group(1) == "4242" and handle.is_alive()
    assert handle.exited() is None
    code = handle.stop(grace_s=10)
    assert code == -15 and not handle.is_alive() and handle.exit_code == -15
    assert log.read_text() == "listening on 4242\n" and handle.log_tail() == "listening on 4242\n"
