"""Everything engine-specific lives on the engine kind: outside stackbook/engines, no string
literal of the library names a registered kind, a process an engine runs or a metric it exports
(docstrings may). The names come from the registry, so a new kind's names are covered too."""
from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import stackbook
from stackbook.engines import registry
from stackbook.routing.registry import ROUTER_KINDS

LIBRARY = Path(stackbook.__file__).parent
# A router kind's own module is the one place that knows its router, as engines/<kind>.py is an
# engine's (sglang-router shares its project's name with the sglang engine kind).
ROUTER_KIND_MODULES = {f"routing/{k.__module__.rsplit('.', 1)[1]}.py" for k in ROUTER_KINDS}

# Literals that may stay, each with why: (module relative to the library, the literal's start).
ALLOWED = {
    # Peer load generators the harness compares itself with, not engine kinds.
    ("measure/metrics.py", "vllm bench serve"),
    ("harness/fidelity.py", "rate_held_ratio_stackbook_over_vllm_bench"),
    ("harness/fidelity.py", "ttft_floor_ratio_stackbook_over_vllm_bench"),
    ("harness/fidelity.py", "rate_at_least_2x_vllm_bench"),
    ("harness/fidelity.py", "ttft_floor_no_higher_than_vllm_bench"),
    # The calibration server is the harness's instrument: its running-requests gauge carries the
    # name engines give theirs, so the batch reading applies to it unchanged.
    ("harness/calibration_server.py", "\n# TYPE calibration:num_requests_running gauge"),
    # User-facing prose in error messages and stated sources, naming the tool a user must run or
    # the engine a measurement came from.
    ("model/artifacts.py", "the conversion runs in the vLLM environment: "),
    ("model/artifacts.py", " GGUF with llama.cpp's converter"),
    ("model/schedule.py", ", which the layer schedule does not read, so what its layers keep per sequence is"),
    ("sizing/memory.py", "workspace and activations default to 0.5 GiB each: the seed's 23.3 GiB pool"),
    # A Ray worker of the cluster executor, not an engine's process.
    ("executors/ray_cluster.py", "the arm's worker died: "),
}


def workbook_libraries() -> set[str]:
    """The distributions the workbook itself depends on (pyproject.toml). A kind named after one of
    them (`transformers`, the server of the library the workbook reads model configs with) is not
    named by the library's name in the workbook's own code."""
    from stackbook.locations import REPO_ROOT
    deps = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0].lower() for d in deps}


def _regex_words(pattern: str) -> list[str]:
    """The literal alternatives of a process pattern ("a\\.b|c" gives a.b and c)."""
    return [w.replace("\\", "") for w in pattern.split("|") if w]


def _metric_names(series) -> set[str]:
    names: set[str] = set()
    for name, value in series:
        if name.endswith("_source"):
            continue  # labels of a reading, not names the engine exports
        if isinstance(value, tuple):
            names.update(value)
        elif isinstance(value, dict):
            names.update(value.values())
        elif isinstance(value, str):
            names.add(value)
    return names


def engine_names() -> tuple[set[str], set[str]]:
    """(names matched as whole words, names matched anywhere): kinds, shortlist names, process
    roles and metric names are words; process patterns are searched inside names, so they are
    matched anywhere."""
    words = (set(registry.ADAPTERS) - workbook_libraries()) | {r.role for r in registry.process_roles()}
    words |= {a.decision.stack for a in registry.ENGINE_ADAPTERS if a.decision is not None}
    for series in registry.metric_series():
        words |= _metric_names(series)
    anywhere = {w for r in registry.process_roles() for w in _regex_words(r.pattern)}
    return words, anywhere


def _docstrings(tree: ast.AST) -> set[int]:
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    return docs


def engine_literals(root: Path = LIBRARY) -> list[str]:
    """Every string literal outside engines/ (docstrings aside) that names an engine."""
    words, anywhere = engine_names()
    word_rx = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, sorted(words, key=len, reverse=True)))
                         + r")(?![A-Za-z0-9_])")
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("engines/") or rel in ROUTER_KIND_MODULES:
            continue
        tree = ast.parse(path.read_text())
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in docs:
                continue
            text = node.value
            if any(rel == f and text.startswith(start) for f, start in ALLOWED):
                continue
            hit = word_rx.search(text)
            name = hit.group(1) if hit else next((w for w in anywhere if w in text), None)
            if name:
                found.append(f"{rel}:{node.lineno}: {name!r} in {text[:80]!r}")
    return found


def test_no_module_outside_engines_names_an_engine_in_a_literal():
    assert engine_literals() == []


def test_the_names_come_from_the_kinds():
    """The scan looks for what the kinds declare: a literal of one of them is caught."""
    words, anywhere = engine_names()
    assert {"llama_cpp", "vllm", "sglang", "vLLM", "num_requests_running", "vllm:prefix_cache_hits_total"} <= words
    assert {"llama_server", "engine_core", "mlx_lm_server"} <= words
    assert {"llama-server", "EngineCor", "vllm serve"} <= anywhere
    # The workbook's own library is not an engine's name; the server's process role still is.
    assert "transformers" not in words and "transformers_serve" in words


def test_the_scan_catches_a_literal_and_skips_a_docstring(tmp_path):
    (tmp_path / "m.py").write_text('"""vllm in a docstring."""\nROLE = "llama_server"\nX = "no engine here"\n')
    assert engine_literals(tmp_path) == ["m.py:2: 'llama_server' in 'llama_server'"]
