"""The package's folders stand in floors: a module imports from its own floor and the floors below,
never from one above. So the ground floors (evidence/, locations) read and test without the rest,
and what reads every concern (run_checks/: preflight, passport, audit) stands above them all
instead of inside a floor the others stand on.

FLOORS names every folder and top-level module of the package, highest first: a new one must be
placed. CLIMBS lists the imports that still run up, each with why: a new climb fails, naming the
import and its line, and so does a listed one that is gone (strike it from the list).
"""
from __future__ import annotations

from pathlib import Path

from tests.support.import_graph import LIB, module_files, package_imports

FLOORS: tuple[tuple[str, ...], ...] = (
    ("cli",),
    ("cli_gpu", "cli_search", "cli_schema"),
    ("gpu_campaign",),
    ("runner",),
    ("executors",),
    ("reports", "arm_run"),
    ("index_page", "steps", "search"),
    ("run_checks",),
    ("analysis", "cli_size", "arm_stages"),
    ("config",),
    ("capacity",),
    ("harness", "routing"),
    ("measure",),
    ("model", "cli_setup", "gate"),
    ("report_page", "engines", "loadgen", "notebook_execution", "papermill_sources"),
    ("lab", "evidence", "sizing", "notebook_sources"),
    ("locations", "host", "browser", "cli_common", "stats"),
    ("__init__",),  # the package's own __init__.py
)

CLIMBS: dict[tuple[str, str], str] = {
    ("engines", "model.artifacts"):
        "adapter_for resolves the arm's model artifacts; the model's set-up converts with the engines' tools",
    ("engines.openai_endpoint", "gate.probe"):
        "the endpoint's readiness asks once whether it honours an exact output length, as the gate probes",
    ("loadgen.sent", "config.protocol"): "the sent bodies' digests read the protocol's decoding settings",
}


def folder(module: str) -> str:
    """The folder or top-level module a dotted module name lives in (`__init__`: the package's own)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def climbs(imports: list[tuple[str, str, int]], floors=FLOORS) -> dict[tuple[str, str], list[str]]:
    """Each import from a lower floor to a higher one, by (importer, imported) without the package
    name, with the lines it is made on."""
    floor = {name: len(floors) - i for i, names in enumerate(floors) for name in names}
    found: dict[tuple[str, str], list[str]] = {}
    for importer, imported, line in imports:
        if floor[folder(importer)] < floor[folder(imported)]:
            key = (importer.partition(".")[2] or importer, imported.partition(".")[2] or imported)
            found.setdefault(key, []).append(f"line {line}")
    return found


def test_every_folder_stands_on_one_floor():
    placed = [name for names in FLOORS for name in names]
    assert len(placed) == len(set(placed)), "a folder placed twice"
    present = {folder(m) for m in module_files()}
    assert present - set(placed) == set(), f"folders with no floor: add them to FLOORS {sorted(present - set(placed))}"
    assert set(placed) - present == set(), f"floors name folders that are gone: {sorted(set(placed) - present)}"


def test_no_import_climbs_to_a_higher_floor():
    modules = module_files()
    found = climbs(package_imports(modules))
    new = {k: v for k, v in found.items() if k not in CLIMBS}
    assert not new, "imports that climb to a higher floor (move what they need down, or pass it in):\n" + "\n".join(
        f"  {modules['stackbook.' + a].relative_to(LIB.parent)} ({', '.join(lines)}): "
        f"{a} -> {b}" for (a, b), lines in sorted(new.items()))
    gone = sorted(set(CLIMBS) - set(found))
    assert not gone, f"listed climbs that no longer happen, strike them from CLIMBS: {gone}"


def test_a_climb_is_named_with_its_line(tmp_path: Path):
    (tmp_path / "pkg" / "low").mkdir(parents=True)
    (tmp_path / "pkg" / "high").mkdir()
    for f in ("__init__.py", "low/__init__.py", "high/__init__.py", "high/b.py"):
        (tmp_path / "pkg" / f).write_text("")
    (tmp_path / "pkg" / "low" / "a.py").write_text("import json\n\ndef f():\n    from pkg.high import b\n")
    (tmp_path / "pkg" / "high" / "c.py").write_text("from pkg.low import a\n")
    imports = package_imports(module_files(tmp_path, "pkg"))
    assert climbs(imports, (("high",), ("low",), ("__init__",))) == {("low.a", "high.b"): ["line 4"]}
