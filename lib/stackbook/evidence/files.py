"""Small file helpers for run directories: atomic JSON, the arm's results side file."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def write_json_atomic(path: str | os.PathLike, data) -> None:
    """Write JSON so that a crash leaves either the old file or the new one, never half."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2, sort_keys=False, default=str)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, p)


def read_json(path: str | os.PathLike, default=None):
    p = Path(path)
    if not p.exists():
        return default
    return json.loads(p.read_text())


def update_results(arm_dir: str | os.PathLike, section: str, data) -> dict:
    """Set one section (sizing, canaries, sweep, ...) of the arm's results.json."""
    path = Path(arm_dir) / "results.json"
    results = read_json(path, {}) or {}
    results[section] = data
    write_json_atomic(path, results)
    return results
