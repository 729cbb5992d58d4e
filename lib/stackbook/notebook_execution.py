"""Executing a workbook notebook with papermill, and telling whether an executed copy still holds."""
from __future__ import annotations

import time
from pathlib import Path

from stackbook.evidence.files import file_sha256


def execute_notebook(name: str, out_path: Path, parameters: dict) -> float:
    """Execute notebooks/<name>.py (built into a notebook in memory) and write the executed
    .ipynb to out_path once it ends (with the failing cell's traceback when one fails). Not after
    every cell: each save serializes every figure drawn so far, seconds a notebook, and what an
    interrupted notebook would have kept is in the raw records, which are written as they arrive."""
    import papermill as pm
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    from stackbook.notebook_sources import load_notebook, stable_ids

    t = time.monotonic()
    nb = load_notebook_node(load_notebook(name))
    if parameters:  # injected here, not by execute_notebook, so the injected cell gets a stable id
        nb = stable_ids(parameterize_notebook(nb, parameters, kernel_name="python3", language="python"))
    pm.execute_notebook(nb, str(out_path), kernel_name="python3", cwd=".", progress_bar=False, log_output=False,
                        request_save_on_cell_execute=False)
    return time.monotonic() - t


def notebook_ok(manifest_arm: dict, name: str, out_path: Path) -> bool:
    """Whether the manifest says this notebook ran and its executed copy is still the one it hashed."""
    entry = manifest_arm["notebooks"].get(name, {})
    return entry.get("status") == "ok" and out_path.exists() and entry.get("sha256") == file_sha256(out_path)
