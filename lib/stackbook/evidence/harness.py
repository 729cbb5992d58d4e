"""The harness revision a run was measured with: fixed once when the run starts, so every arm's
passport carries the same value, and compared when the run is resumed. A modified tree is
recorded with the digest of its diff (run outputs excluded: a run being written is not code)."""
from __future__ import annotations

import hashlib
import subprocess

from stackbook import __version__
from stackbook.locations import REPO_ROOT


class RevisionChanged(RuntimeError):
    """A resumed run would mix measurements of two harness revisions."""


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.decode(errors="replace") if out.returncode == 0 else None


def current_revision() -> dict:
    """This checkout's revision: the commit, and for a modified tree the sha256 of its diff
    against that commit (tracked files; outputs/ left out)."""
    commit = (_git("rev-parse", "--short=12", "HEAD") or "").strip()
    diff = _git("diff", "HEAD", "--", ".", ":(exclude)outputs") if commit else None
    out = {"version": __version__, "commit": commit or None, "modified": bool(diff)}
    if diff:
        out["diff_sha256"] = hashlib.sha256(diff.encode()).hexdigest()[:16]
    return out


def describe(revision: dict | None) -> str:
    """One line: `stackbook 0.1.0 (abc123def456)`, with `+modified <diff digest>` for a modified tree."""
    if not revision:
        return "not recorded"
    if not revision.get("commit"):
        return f"stackbook {revision.get('version')} (no git revision)"
    extra = f"+modified {revision['diff_sha256']}" if revision.get("modified") else ""
    return f"stackbook {revision['version']} ({revision['commit']}{extra})"


def fix_revision(manifest_data: dict, resumed: bool) -> dict:
    """The run's one harness revision: recorded at its start; a resumed run must be measured by
    the same code, else it is refused with both revisions named."""
    now = current_revision()
    recorded = manifest_data.get("harness")
    if recorded is None:
        manifest_data["harness"] = now
        return now
    if resumed and describe(recorded) != describe(now):
        raise RevisionChanged(
            f"this run was measured by {describe(recorded)} and the checkout is now {describe(now)}: resuming would "
            "mix two harness revisions in one run. Check out the run's revision to resume it, or start a new run")
    return recorded
