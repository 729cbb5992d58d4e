"""The set-up compiles stackbook's modules once, so that processes told not to write bytecode
(PYTHONDONTWRITEBYTECODE, as on the hosts that run this suite) read them compiled instead of
compiling each module in every notebook kernel and client process."""
import importlib.util
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def bytecode_step(root: Path) -> subprocess.CompletedProcess:
    """tools/bootstrap.sh's workbook_bytecode, run alone against another checkout root."""
    script = (REPO / "tools" / "bootstrap.sh").read_text()
    body = script[script.index("workbook_bytecode() {"):]
    body = body[:body.index("\n}\n") + 3]
    env = os.environ | {"PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(["bash", "-c", f'set -euo pipefail; ROOT="$1"; {body}\nworkbook_bytecode', "_", str(root)],
                          capture_output=True, text=True, env=env, timeout=120)


def fresh_bytecode(source: Path) -> bool:
    """A timestamp pyc beside the source whose header names the source's current mtime and size."""
    cached = Path(importlib.util.cache_from_source(str(source)))
    if not cached.exists():
        return False
    head = cached.read_bytes()[:16]
    flags, mtime, size = struct.unpack("<III", head[4:16])
    st = source.stat()
    return head[:4] == importlib.util.MAGIC_NUMBER and flags == 0 and (mtime, size) == (
        int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF)


def test_every_module_is_compiled_even_where_bytecode_is_not_written(tmp_path):
    (tmp_path / "lib").mkdir()
    shutil.copytree(REPO / "lib" / "stackbook", tmp_path / "lib" / "stackbook",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").symlink_to(sys.executable)
    sources = sorted((tmp_path / "lib" / "stackbook").rglob("*.py"))
    assert len(sources) > 100 and not any(fresh_bytecode(s) for s in sources)

    r = bytecode_step(tmp_path)
    assert r.returncode == 0, r.stderr
    assert [s for s in sources if not fresh_bytecode(s)] == []

    # An edited module reads stale until the next set-up compiles it again.
    edited = tmp_path / "lib" / "stackbook" / "locations.py"
    edited.write_text(edited.read_text() + "\n# edited\n")
    assert not fresh_bytecode(edited)
    assert bytecode_step(tmp_path).returncode == 0 and fresh_bytecode(edited)
