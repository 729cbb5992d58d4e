"""Records that read the same on any machine and never hold a secret: symbolic paths and
redacted API keys, applied to every text file of a run."""
from __future__ import annotations

import os

from stackbook.evidence.rundir import RunDir
from stackbook.locations import absolute_paths_in, symbolic

TEXT_SUFFIXES = {".ipynb", ".json", ".jsonl", ".md", ".log", ".yaml", ".html", ".txt", ".csv"}


def redact(text: str, secrets: list[str]) -> str:
    for s in secrets:
        if s:
            text = text.replace(s, "[REDACTED]")
    return text


def campaign_secrets(campaign) -> list[str]:
    """Values of every API-key variable an arm names (they must never reach a file)."""
    out = []
    for arm in campaign.arms:
        env = getattr(arm.engine, "api_key_env", None)
        if env and os.environ.get(env):
            out.append(os.environ[env])
    return out


def make_portable(run: RunDir, secrets: list[str]) -> list[str]:
    """Rewrite every text file of a run with symbolic paths and secrets redacted.

    Returns the absolute paths that survived (there should be none)."""
    leftovers = []
    for p in run.files():
        if p.suffix not in TEXT_SUFFIXES:
            continue
        text = p.read_text(errors="replace")
        new = redact(symbolic(text), secrets)
        if new != text:
            p.write_text(new)
        leftovers += [f"{p.relative_to(run.path)}: {symbolic(a)}" for a in absolute_paths_in(new)]
    return leftovers
