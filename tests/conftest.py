import os
from pathlib import Path

import pytest
from stackbook.engines import ADAPTERS
from stackbook.locations import REPO_ROOT
from stackbook.model.artifacts import embedded_artifacts

from tests.support.calibration import calibration_servers
from tests.support.runs import copy_committed_run_to

os.chdir(REPO_ROOT)
# The suite runs campaigns from the checkout it tests, committed or not: its runs from modified
# code are allowed (and marked so), in this process and in every `stackbook run` it starts.
os.environ.setdefault("STACKBOOK_ALLOW_MODIFIED", "1")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`make test`'s two workers (`-n 2 --dist loadgroup`): the engine group on one, every other
    module whole on the other (tests/support/worker_groups.py)."""
    if config.getvalue("dist") == "loadgroup":
        from tests.support.worker_groups import EngineGroupScheduling
        return EngineGroupScheduling(config, log)
    return None


def engines_ready() -> str | None:
    art = embedded_artifacts()
    if not (art.hf_dir / "model.safetensors").exists() or not art.gguf.exists():
        return "the embedded model is not set up (make test sets it up)"
    for adapter in ADAPTERS.values():  # every kind the suite's set-up installs (make test), none named here
        if adapter.bootstrap_step and adapter.setup_target in ("quickstart", "test") and not adapter.is_installed():
            return f"{adapter.kind} is not installed (make test installs it: {adapter.installs})"
    return None


@pytest.fixture(scope="session")
def real_engines():
    """The real engines and the embedded model. Under `make test` (CI) they must be present."""
    missing = engines_ready()
    if missing:
        if os.environ.get("CI") or os.environ.get("STACKBOOK_REQUIRE_ENGINES"):
            pytest.fail(missing)
        pytest.skip(missing)
    return embedded_artifacts()


@pytest.fixture(scope="session")
def test_run_id(tmp_path_factory) -> str:
    """A run id no other session takes: the session's numbered temporary folder (pytest-N), with
    the worker's name beside it under xdist (whose folders, popen-gw0 and on, repeat)."""
    base = tmp_path_factory.getbasetemp()
    return "test-" + (f"{base.parent.name}-{base.name}" if base.name.startswith("popen-") else base.name)


@pytest.fixture
def write_campaign(tmp_path):
    def write(text: str, name: str = "c.yaml") -> Path:
        p = tmp_path / name
        p.write_text(text)
        return p
    return write


@pytest.fixture
def start_calibration_server():
    """`start(**options)`: a calibration server for this test, stopped after it."""
    with calibration_servers() as start:
        yield start


@pytest.fixture(scope="module")
def start_module_calibration_server():
    """`start(**options)`: a calibration server shared by a module's tests, stopped after them."""
    with calibration_servers() as start:
        yield start


@pytest.fixture
def copy_committed_run(tmp_path):
    """`copy(campaign, run_id="reference", to=campaign, ignore=...)`: a committed run copied to
    tmp_path/`to` (see copy_committed_run_to for what is left out)."""
    def copy(campaign: str, run_id: str = "reference", *, to: str | None = None,
             ignore: tuple[str, ...] = ("*.ipynb",)) -> Path:
        return copy_committed_run_to(tmp_path / (to or campaign), campaign, run_id, ignore=ignore)
    return copy
