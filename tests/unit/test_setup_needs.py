"""The set-up starts the engine installs once .venv holds SETUP_NEEDS (tools/bootstrap.sh), with
stackbook read from lib/, while the rest of the workbook environment installs: everything the
engine and router steps import must come from those packages, or the first set-up on a new
machine fails halfway."""
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
BOOTSTRAP = REPO / "tools" / "bootstrap.sh"

# Run in a child: every module of a distribution outside ALLOWED is refused at import, so an import
# that set-up's first stage does not provide fails here as it would on a new machine.
GUARDED = """
import importlib.abc, re, sys
from importlib import metadata
ALLOWED = set(sys.argv[1].split(","))
OWNERS = metadata.packages_distributions()

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        owners = {re.sub(r"[-_.]+", "-", d).lower() for d in OWNERS.get(name.split(".")[0], ())}
        if owners and not owners & ALLOWED:
            raise ModuleNotFoundError(f"{name} (from {sorted(owners)}) is not in set-up's first stage", name=name)
        return None

sys.meta_path.insert(0, Refuse())
import pkgutil, stackbook.engines, stackbook.routing.install, stackbook.cli
for mod in pkgutil.iter_modules(stackbook.engines.__path__, "stackbook.engines."):
    __import__(mod.name)
from stackbook.cli import app
try:
    app(["setup-engine", "--target", "quickstart", "--needs-compiler"])
except SystemExit as done:
    print("exit", done.code)
"""


def setup_needs() -> list[str]:
    found = re.search(r"^SETUP_NEEDS=\(([^)]*)\)", BOOTSTRAP.read_text(), re.MULTILINE)
    assert found, "tools/bootstrap.sh defines SETUP_NEEDS=(...)"
    return found.group(1).split()


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(names: list[str]) -> set[str]:
    """The distributions `names` install: each with what it requires (no extras), by installed metadata."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        dist = metadata.distribution(todo.pop())
        name = canonical(dist.metadata["Name"])
        if name in seen:
            continue
        seen.add(name)
        for line in dist.requires or ():
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


def test_setup_needs_are_workbook_dependencies_and_include_the_build_tool():
    declared = {canonical(Requirement(r).name) for r in
                tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]}
    needs = setup_needs()
    assert {canonical(n) for n in needs} <= declared, f"not in pyproject's dependencies: {set(needs) - declared}"
    assert "ninja" in needs  # llama_cpp_build.ninja_flags looks for it beside .venv's python


def test_engine_and_router_steps_import_only_what_setup_installs_first():
    allowed = closure(setup_needs()) | {"stackbook"}
    assert {"pydantic-core", "rich"} <= allowed  # the closure follows requirements
    done = subprocess.run([sys.executable, "-c", GUARDED, ",".join(sorted(allowed))], cwd=REPO,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "lib")},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert re.search(r"^exit [01]$", done.stdout, re.MULTILINE), done.stdout


def test_the_guard_refuses_a_module_outside_the_first_stage():
    probe = GUARDED.split("import pkgutil")[0] + "import pandas\n"
    done = subprocess.run([sys.executable, "-c", probe, "stackbook"], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "pandas" in done.stderr and "first stage" in done.stderr
