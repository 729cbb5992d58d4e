"""The notebooks' sources: jupytext percent files (notebooks/NN_name.py) read into the nbformat
notebooks that papermill executes.

The sources are plain Python, so linters, reviews and diffs read them. Each ships with its
.ipynb twin (notebooks/NN_name.ipynb, no outputs, the same `parameters` cell) for papermill and
Jupyter users: `python -m stackbook.notebook_sources` (make notebooks) writes the twins, and a
test fails when one drifts from its source. Cell ids come from each cell's position and text, so
reading the same source twice gives the same notebook, and two runs' notebooks differ only where
their outputs do.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

import jupytext
import nbformat

from stackbook.locations import REPO_ROOT

SOURCES_DIR = REPO_ROOT / "notebooks"
SOURCE_FORMAT = "py:percent"
# The kernel set-up registers in .venv (JupyterLab lists it by this name); the runner executes with
# the environment's own python3 kernel, which is the same interpreter.
KERNELSPEC = {"name": "stackbook", "display_name": "Python (stackbook)", "language": "python"}


def source_path(name: str) -> Path:
    """notebooks/<name>.py, e.g. source_path("30_load_sweep")."""
    return SOURCES_DIR / f"{name}.py"


def source_names() -> list[str]:
    """Every notebook the project ships, in reading order."""
    return sorted(p.stem for p in SOURCES_DIR.glob("[0-9][0-9]_*.py"))


def cell_id(index: int, source: str) -> str:
    """Position first (ids stay unique even for identical cells), then a digest of the text."""
    return f"{index:02d}-{hashlib.sha256(source.encode()).hexdigest()[:8]}"


STABLE_ID = re.compile(r"\d\d+-[0-9a-f]{8}")


def stable_ids(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A cell papermill or a page inserted (its id random) gets one from its position and text;
    the source's own cells keep theirs. Rendering a run again then changes a page only where its
    content changed, and an executed notebook's cells still match its source's."""
    for i, cell in enumerate(nb.cells):
        if not STABLE_ID.fullmatch(cell.get("id") or ""):
            cell["id"] = cell_id(i, cell.source)
    return nb


def read_source(path: str | Path) -> nbformat.NotebookNode:
    """A percent source as a validated notebook: the stackbook kernel, stable cell ids, no outputs."""
    nb = jupytext.read(Path(path), fmt=SOURCE_FORMAT)
    nb.nbformat, nb.nbformat_minor = 4, max(nb.get("nbformat_minor", 0), 5)
    # The executed copy lives in a run directory: it must not claim to be paired with a source.
    nb.metadata.pop("jupytext", None)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    for i, cell in enumerate(nb.cells):
        cell["id"] = cell_id(i, cell.source)
    nbformat.validate(nb)
    return nb


def load_notebook(name: str) -> nbformat.NotebookNode:
    """The notebook `name` (e.g. "40_analysis"), ready for papermill."""
    return read_source(source_path(name))


def twin_path(name: str) -> Path:
    """notebooks/<name>.ipynb, the papermill-ready twin of the source."""
    return SOURCES_DIR / f"{name}.ipynb"


def twin_text(name: str) -> str:
    """The twin's exact text, as the source makes it."""
    return nbformat.writes(load_notebook(name)) + "\n"


def write_twins() -> list[Path]:
    """Every source's .ipynb twin, written where it differs."""
    written = []
    for name in source_names():
        path, text = twin_path(name), twin_text(name)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            written.append(path)
    return written


if __name__ == "__main__":
    for p in write_twins():
        print(f"wrote {p.relative_to(REPO_ROOT)}")
