"""The sources pass `ruff check` under the rules pyproject.toml names ([tool.ruff])."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ["lib", "tests", "benchmarks", "tools", *sorted(p.relative_to(ROOT).as_posix()
                                                        for p in (ROOT / "notebooks").glob("*.py"))]


def ruff(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """`ruff` from this environment (the `test` extra installs it), run from the repository root."""
    try:
        import ruff as _  # noqa: F401
    except ImportError:
        raise AssertionError("ruff is not installed: `pip install -e '.[test]'` (or `make test`) installs it") from None
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=ROOT, input=stdin,
                          capture_output=True, text=True, timeout=300)


def test_sources_pass_ruff():
    done = ruff("check", "--no-cache", "--output-format", "concise", *CHECKED)
    assert done.returncode == 0, (
        f"ruff check found problems (`ruff check --fix` mends the fixable ones):\n{done.stdout}{done.stderr}")


def test_the_configuration_catches_a_long_line():
    """The check would fail: a 121-column line in a checked folder is reported as E501."""
    line = "x = " + repr("a" * 115) + "\n"
    assert len(line.rstrip("\n")) == 121
    done = ruff("check", "--no-cache", "--output-format", "concise", "--stdin-filename", "lib/stackbook/x.py", "-",
                stdin=line)
    assert done.returncode == 1 and "E501" in done.stdout, done.stdout + done.stderr
