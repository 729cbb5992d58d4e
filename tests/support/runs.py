"""Copies of the committed runs under outputs/, for tests that rewrite or re-render a run."""
import shutil
from pathlib import Path

from stackbook.locations import REPO_ROOT

# What a run renders from its evidence: the tests draw it anew or do not need it.
RENDERED = ("*.html", "figures")


def copy_committed_run_to(dest: Path, campaign: str, run_id: str = "reference", *,
                          ignore: tuple[str, ...] = ("*.ipynb",)) -> Path:
    """Copy outputs/<campaign>/<run_id> to `dest` without its rendered pages and figures nor the
    files named by `ignore` (by default its notebooks; pass the ones to leave out where a test
    executes the others); returns `dest`."""
    shutil.copytree(REPO_ROOT / "outputs" / campaign / run_id, dest, ignore=shutil.ignore_patterns(*RENDERED, *ignore))
    return Path(dest)
