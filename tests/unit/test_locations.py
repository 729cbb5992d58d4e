from pathlib import Path

from stackbook.locations import (
    REPO_ROOT,
    absolute_paths_in,
    cache_dir,
    resolve_symbolic,
    symbolic,
)


def test_symbolic_round_trip():
    p = cache_dir() / "models" / "x.gguf"
    s = symbolic(str(p))
    assert s == "$STACKBOOK_CACHE/models/x.gguf"
    assert resolve_symbolic(s) == p


def test_repo_paths_become_relative_and_home_tilde():
    assert symbolic(f"see {REPO_ROOT}/outputs/q/r") == "see outputs/q/r"
    assert symbolic(str(Path.home() / "elsewhere")) == "~/elsewhere"


def test_absolute_path_detector():
    assert absolute_paths_in("log: /root/.cache/x and $STACKBOOK_CACHE/y") == ["/root/.cache/x"]
    assert absolute_paths_in("./outputs/a ~/b") == []
