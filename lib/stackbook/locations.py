"""Where things live, and how to write a location so a record reads the same on any machine."""
from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = Path(__file__).with_name("data")  # catalogs and canary suites shipped with the package
OUTPUTS = Path("outputs")  # every run and comparison, relative to the repository root so records read the same anywhere
OUTPUTS_DIR = REPO_ROOT / OUTPUTS  # the same, absolute: where the index and default comparisons are written


def cache_dir() -> Path:
    """The cache outside the checkout: engines, the embedded model, downloads."""
    return Path(os.environ.get("STACKBOOK_CACHE", Path.home() / ".cache" / "stackbook")).expanduser()


def shown(path: str | os.PathLike) -> str:
    """A path as a message shows it: as written, or quoted when blank, padded or not printable."""
    s = str(path)
    return s if s and s.strip() == s and s.isprintable() else repr(s)


def symbolic(text: str | os.PathLike) -> str:
    """Replace machine-specific locations by symbols ($STACKBOOK_CACHE, ., ~).

    Records under outputs/ are committed and read on other machines: an absolute path of the
    machine that made them would say nothing there, and leaks its layout.
    """
    s = str(text)
    replacements = [
        (str(cache_dir().resolve()), "$STACKBOOK_CACHE"),
        (str(cache_dir()), "$STACKBOOK_CACHE"),
        (str(REPO_ROOT) + "/", ""),
        (str(REPO_ROOT), "."),
        (str(Path.home()), "~"),
        (tempfile.gettempdir().rstrip("/") + "/", "$TMPDIR/"),
    ]
    for old, new in replacements:
        if old and old not in ("/", "."):
            s = s.replace(old, new)
    return s


def resolve_symbolic(text: str) -> Path:
    """Inverse of :func:`symbolic` for paths read back from a record or campaign."""
    s = text.replace("$STACKBOOK_CACHE", str(cache_dir()))
    if s.startswith("~"):
        s = str(Path(s).expanduser())
    p = Path(s)
    return p if p.is_absolute() else REPO_ROOT / p


_ABS_PATH = re.compile(r"(?<![\w.$~])/(?:root|home|tmp|work|Users|opt|usr/local)/[^\s\"'<>]+")


def absolute_paths_in(text: str) -> list[str]:
    """Absolute paths of this kind of machine that remain in a text (for the portability check)."""
    return _ABS_PATH.findall(text)


def relative_to_repo(path: os.PathLike | str) -> str:
    """A path relative to the repository root when it lies inside it, else symbolic."""
    p = Path(path).resolve()
    try:
        return str(p.relative_to(REPO_ROOT))
    except ValueError:
        return symbolic(p)
