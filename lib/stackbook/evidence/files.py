"""Small file helpers for run directories: atomic JSON, a file's sha256, the arm's results side file."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable, TypeVar

from pydantic import BaseModel

if TYPE_CHECKING:
    from stackbook.evidence.rundir import ArmDir

T = TypeVar("T")


def write_json_atomic(path: str | os.PathLike, data) -> None:
    """Write JSON so that a crash leaves either the old file or the new one, never half."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, sort_keys=False, default=str)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)  # a full disk leaves the old file, and no half-written copy beside it
        raise


def _jsonable(value):
    """What pydantic cannot serialize on its own (numpy scalars in open dicts): plain values."""
    return value.item() if hasattr(value, "item") else str(value)


def model_json(model: BaseModel) -> dict:
    """A validated model as the JSON a file holds: the fields that were set, extras kept."""
    return model.model_dump(mode="json", exclude_unset=True, fallback=_jsonable)


def write_model(path: str | os.PathLike, model: BaseModel) -> None:
    """A validated model, written atomically."""
    write_json_atomic(path, model_json(model))


def read_json(path: str | os.PathLike, default=None):
    p = Path(path)
    if not p.exists():
        return default
    return json.loads(p.read_text())


def while_unchanged(cache: dict, path: str | os.PathLike, build: Callable[[Path], T], keep: int = 16) -> T:
    """build(path), or what it gave for this file before while the file's size and modification
    time are still the same (appending to it, or rewriting it, builds anew). The cache holds at
    most `keep` files."""
    path = Path(path)
    st = path.stat()
    key, stamp = str(path.resolve()), (st.st_size, st.st_mtime_ns)
    hit = cache.get(key)
    if hit is None or hit[0] != stamp:
        if len(cache) >= keep:
            cache.clear()
        hit = cache[key] = (stamp, build(path))
    return hit[1]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


_hash_cache: dict = {}


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 of a file, read in blocks (model weights are large); kept while the file is unchanged."""
    return while_unchanged(_hash_cache, path, _sha256, keep=1024)


def update_results(arm_dir: ArmDir, section: str, data) -> dict:
    """Set one section (sizing, canaries, sweep) of the arm's results.json, validated against its
    model first: a section that does not match is refused before it reaches the file."""
    from stackbook.evidence.results import validate_section

    path = arm_dir.results
    section_json = model_json(validate_section(section, data))
    results = read_json(path, {}) or {}
    results[section] = section_json
    write_json_atomic(path, results)
    return results
