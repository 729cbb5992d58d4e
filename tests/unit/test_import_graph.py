"""The stackbook package imports without cycles, and each module imports alone.

The static graph (tests/support/import_graph.py) counts late imports inside functions, because a
late import only hides a cycle from the interpreter, not from the reader; imports under
``if TYPE_CHECKING:`` never run and do not count.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from tests.support.import_graph import LIB, import_graph, module_files


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Cycles covering every module caught in one: per strongly connected component, a shortest
    cycle through each member no earlier cycle passed through."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = [0]

    def strongconnect(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                strongconnect(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(graph):
        if node not in index:
            strongconnect(node)
    found: list[list[str]] = []
    for component in sorted(components):
        covered: set[str] = set()
        for start in component:
            if start not in covered:
                found.append(_a_cycle_through(start, set(component), graph))
                covered.update(found[-1])
    return found


def _a_cycle_through(start: str, members: set[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest path from ``start`` back to itself within its component."""
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for succ in sorted(graph[node] & members):
                if succ == start:
                    return paths[node] + [start]
                if succ not in paths:
                    paths[succ] = paths[node] + [succ]
                    following.append(succ)
        frontier = following
    raise AssertionError(f"no cycle through {start}")


def test_the_graph_sees_relative_late_and_submodule_imports(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .a import thing\n")
    (pkg / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from pkg import b\n"
        "def f():\n    from .sub import c\n"
    )
    (pkg / "b.py").write_text("import pkg.a\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "c.py").write_text("from .. import b\n")
    (pkg / "d.py").write_text("from . import a, CONSTANT\n")
    graph = import_graph(module_files(tmp_path, "pkg"))
    assert graph == {
        "pkg": {"pkg.a"},
        "pkg.a": {"pkg.sub.c"},
        "pkg.b": {"pkg.a"},
        "pkg.d": {"pkg", "pkg.a"},
        "pkg.sub": set(),
        "pkg.sub.c": {"pkg.b"},
    }
    assert cycles(graph) == [["pkg.a", "pkg.sub.c", "pkg.b", "pkg.a"]]


def test_the_package_has_no_import_cycle():
    found = cycles(import_graph(module_files()))
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


# One interpreter imports the third-party libraries the package uses, then forks a child per
# module: each child imports one module of the package and nothing else of it, as a fresh
# interpreter would, without paying for the libraries again (that took a minute, 200 times over).
FORKING_IMPORTER = r"""
import importlib, os, sys, traceback
for lib in ("numpy", "pandas", "scipy.stats", "matplotlib", "matplotlib.pyplot", "seaborn", "pydantic", "httpx",
            "yaml", "typer", "nbformat", "papermill", "jupytext", "tqdm", "jsonschema", "psutil", "tokenizers",
            "orjson", "uvloop", "prometheus_client", "gguf", "ray", "nbconvert", "jinja2", "IPython"):
    try:
        importlib.import_module(lib)
    except Exception:
        pass
# papermill loads its `papermill.io` entry points, stackbook.papermill_sources among them: forget
# them, so each child imports its module as a fresh interpreter would.
for m in [m for m in sys.modules if m == "stackbook" or m.startswith("stackbook.")]:
    del sys.modules[m]
failed = 0
for name in sys.argv[1:]:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            importlib.import_module(name)
            code = 0
        except BaseException:
            os.write(write, traceback.format_exc()[-2000:].encode())
            code = 1
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as r:
        err = r.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        failed += 1
        print(f"{name}:\n{err}\n")
sys.exit(1 if failed else 0)
"""


def test_each_module_imports_alone():
    skipped = {name for name in module_files() if name.endswith("convert_gguf_to_hf")}
    names = [name for name in module_files() if name not in skipped]
    env = {**os.environ, "PYTHONPATH": str(LIB), "MPLBACKEND": "Agg", "TOKENIZERS_PARALLELISM": "false"}

    def importer(share: list[str]):
        return subprocess.run([sys.executable, "-c", FORKING_IMPORTER, *share], capture_output=True, text=True,
                              env=env, timeout=600)
    with ThreadPoolExecutor(max_workers=2) as pool:  # two importers, half the modules each
        done = list(pool.map(importer, [names[0::2], names[1::2]]))
    assert all(d.returncode == 0 for d in done), "".join(d.stdout[-6000:] + d.stderr[-2000:] for d in done)


def test_the_importer_catches_a_module_that_needs_another_imported_first(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "ok.py").write_text("import json\n")
    (tmp_path / "pkg" / "bad.py").write_text("import pkg\npkg.ok.loads\n")   # works only after pkg.ok
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", FORKING_IMPORTER, "pkg.ok", "pkg.bad"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 1 and "pkg.bad:" in done.stdout and "pkg.ok:" not in done.stdout
