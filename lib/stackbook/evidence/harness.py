"""The harness revision a run was measured with: fixed once when the run starts, so every arm's
passport carries the same value, and compared when the run is resumed. The code is what is
tracked under lib/, notebooks/ and campaigns/: a run is started only from committed code, so the
code that made it exists somewhere, unless asked for explicitly (`--allow-modified`, or
STACKBOOK_ALLOW_MODIFIED=1); then the run is recorded with the digest of its diff and says
"recorded from uncommitted code" wherever its revision is shown."""
from __future__ import annotations

import hashlib
import os
import subprocess

from stackbook import __version__
from stackbook.locations import REPO_ROOT

CODE_PATHS = ("lib", "notebooks", "campaigns")  # what makes a run; outputs, docs and tests do not
ALLOW_ENV = "STACKBOOK_ALLOW_MODIFIED"
NAMED_FILES = 5  # changed files a refusal names before "and N more"


class RevisionChanged(RuntimeError):
    """A resumed run would mix measurements of two harness revisions."""


class UncommittedCode(RuntimeError):
    """A run would be recorded from code no commit holds."""


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.decode(errors="replace") if out.returncode == 0 else None


def current_revision() -> dict:
    """This checkout's revision: the commit, and for modified code the sha256 of its diff against
    that commit and the files it changes (tracked files under CODE_PATHS)."""
    commit = (_git("rev-parse", "--short=12", "HEAD") or "").strip()
    diff = _git("diff", "HEAD", "--", *CODE_PATHS) if commit else None
    out = {"version": __version__, "commit": commit or None, "modified": bool(diff)}
    if diff:
        out["diff_sha256"] = hashlib.sha256(diff.encode()).hexdigest()
        out["changed_files"] = (_git("diff", "--name-only", "HEAD", "--", *CODE_PATHS) or "").split()
    return out


def uncommitted(revision: dict) -> str:
    """The mark of a run recorded from modified code, as every place that shows it reads."""
    return f"recorded from uncommitted code (diff sha256 {revision.get('diff_sha256', '?')[:16]})"


def describe(revision: dict | None) -> str:
    """One line: `stackbook 0.1.0 (abc123def456)`; for modified code allowed to run, `, recorded
    from uncommitted code (diff sha256 <16 hex>)`. A run recorded before runs were refused keeps
    the line its passports were written with: `(abc123def456+modified <diff digest>)`."""
    if not revision:
        return "not recorded"
    if not revision.get("commit"):
        return f"stackbook {revision.get('version')} (no git revision)"
    if revision.get("modified") and revision.get("note"):
        return f"stackbook {revision['version']} ({revision['commit']}), {revision['note']}"
    extra = f"+modified {revision['diff_sha256']}" if revision.get("modified") else ""
    return f"stackbook {revision['version']} ({revision['commit']}{extra})"


def _code(revision: dict) -> tuple:
    """What must match for two revisions to be the same code: the commit and any diff's digest."""
    return (revision.get("version"), revision.get("commit"), bool(revision.get("modified")),
            (revision.get("diff_sha256") or "")[:16])


def allowed(flag: bool) -> str | None:
    """Who allowed a run from modified code: the flag, the environment variable, or no one."""
    if flag:
        return "--allow-modified"
    if os.environ.get(ALLOW_ENV, "").strip().lower() in ("1", "true", "yes"):
        return f"{ALLOW_ENV}=1"
    return None


def starting_revision(allow_modified: bool = False) -> dict:
    """The revision a run starts from: refused, naming the changed files and both ways on, when
    the code is modified and no one allowed it; marked when it was allowed."""
    now = current_revision()
    if not now["modified"]:
        return now
    by = allowed(allow_modified)
    if by is None:
        files = now["changed_files"]
        named = ", ".join(files[:NAMED_FILES]) + (f" and {len(files) - NAMED_FILES} more" if len(files) > NAMED_FILES
                                                  else "")
        raise UncommittedCode(
            f"the work tree has uncommitted changes to {len(files)} tracked file(s) under "
            f"{', '.join(p + '/' for p in CODE_PATHS[:-1])} or {CODE_PATHS[-1]}/: {named}. A run measured with them "
            f"could be rebuilt from no "
            "commit. Commit them and run again, or pass --allow-modified (or set "
            f"{ALLOW_ENV}=1) to record anyway: the run is then marked \"{uncommitted(now)}\" in its manifest, "
            "passports and report")
    return now | {"allowed_by": by, "note": uncommitted(now)}


def fix_revision(manifest_data: dict, resumed: bool, now: dict | None = None) -> dict:
    """The run's one harness revision: recorded at its start; a resumed run must be measured by
    the same code, else it is refused with both revisions named."""
    now = now or current_revision()
    recorded = manifest_data.get("harness")
    if recorded is None:
        manifest_data["harness"] = now
        return now
    if resumed and _code(recorded) != _code(now):
        raise RevisionChanged(
            f"this run was measured by {describe(recorded)} and the checkout is now {describe(now)}: resuming would "
            "mix two harness revisions in one run. Check out the run's revision to resume it, or start a new run")
    return recorded
