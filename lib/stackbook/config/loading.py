"""Reading a campaign file: YAML, then the schema; every failure is a CampaignError naming the
file, the field and the fix."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from stackbook.config.campaign import Campaign
from stackbook.config.errors import CampaignError, format_validation_error
from stackbook.locations import shown as shown_path


def parse_campaign(data: Any, path: str = "<campaign>") -> Campaign:
    if not isinstance(data, dict):
        raise CampaignError(f"{path}: a campaign file must be a YAML mapping with name, protocol and arms; "
                            f"got {type(data).__name__}")
    try:
        return Campaign.model_validate(data)
    except ValidationError as err:
        raise CampaignError(format_validation_error(path, err, Campaign)) from None


def load_campaign(path: str | os.PathLike) -> Campaign:
    """Read and validate a campaign file. Raises CampaignError naming the file, field and fix."""
    p = Path(path)
    shown = shown_path(path)
    try:
        is_file, is_dir = p.is_file(), p.is_dir()
    except OSError as err:  # a name too long, or one the file system cannot hold
        raise CampaignError(f"{shown[:200]}: not a campaign file ({err.strerror or err}); give a YAML campaign "
                            "file, e.g. campaigns/quickstart.yaml") from None
    if not is_file:
        what = "a directory, not a campaign file" if is_dir else "no such campaign file"
        raise CampaignError(f"{shown}: {what}; campaigns live in campaigns/, e.g. campaigns/quickstart.yaml")
    try:
        data = yaml.load(p.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (UnicodeDecodeError, OSError) as err:
        raise CampaignError(f"{shown}: cannot be read as a UTF-8 text file "
                            f"({err}); give a YAML campaign file") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err)
        raise CampaignError(f"{shown}: YAML syntax error{where}: {problem}. Fix: check indentation "
                            "and that every 'key: value' has a space after the colon") from None
    return parse_campaign(data, shown)
