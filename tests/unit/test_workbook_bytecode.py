"""The set-up compiles stackbook's modules once, so that processes told not to write bytecode
(PYTHONDONTWRITEBYTECODE, as on the hosts that run this suite) read them compiled instead of
compiling each module in every notebook kernel and client process; and it compiles the workbook's
packages, installed without their bytecode, on every core."""
import importlib.util
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def bytecode_step(root: Path, step: str = "workbook_bytecode") -> subprocess.CompletedProcess:
    """One of tools/bootstrap.sh's bytecode functions, run alone against another checkout root."""
    script = (REPO / "tools" / "bootstrap.sh").read_text()
    body = script[script.index(f"{step}() {{"):]
    body = body[:body.index("\n}\n") + 3]
    env = os.environ | {"PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(["bash", "-c", f'set -euo pipefail; ROOT="$1"; {body}\n{step}', "_", str(root)],
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


def test_packages_installed_without_bytecode_are_compiled_and_a_file_that_does_not_compile_is_left(tmp_path):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / ".venv")], check=True)
    site = Path(subprocess.run([str(tmp_path / ".venv" / "bin" / "python"), "-c",
                                "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    assert site.is_relative_to(tmp_path)
    package = site / "somepkg"
    (package / "sub").mkdir(parents=True)
    modules = [package / "__init__.py", package / "core.py", package / "sub" / "deep.py"]
    for i, module in enumerate(modules):
        module.write_text(f"VALUE = {i}\n")
    (package / "py2_example.py").write_text('print "a Python 2 example"\n')
    assert not any(fresh_bytecode(m) for m in modules)

    r = bytecode_step(tmp_path, "package_bytecode")
    assert r.returncode == 0, r.stderr
    assert [m for m in modules if not fresh_bytecode(m)] == []
    assert not fresh_bytecode(package / "py2_example.py")
