"""`stackbook schema`: the JSON Schema of the campaign file or of a file a run writes."""
from __future__ import annotations

import json

import typer

from stackbook.cli_common import fail as _fail

SCHEMAS = {
    "campaign": ("stackbook.config.campaign", "Campaign"),
    "results": ("stackbook.evidence.results", "ArmResults"),
    "passport": ("stackbook.run_checks.passport", "Passport"),
    "analysis": ("stackbook.analysis.comparison", "CampaignAnalysis"),
    "manifest": ("stackbook.evidence.manifest", "Manifest"),
}


def schema_of(kind: str) -> dict:
    """The JSON Schema of a campaign file or of one of the files a run writes."""
    import importlib
    import warnings

    if kind not in SCHEMAS:
        raise ValueError(f"no schema {kind!r}; choose one of: {', '.join(SCHEMAS)}")
    module, name = SCHEMAS[kind]
    with warnings.catch_warnings():
        # A length written as a bare integer (the campaign's shorthand) is a valid default that
        # pydantic warns about when it serializes it into the schema.
        warnings.simplefilter("ignore", UserWarning)
        return getattr(importlib.import_module(module), name).model_json_schema()


def schema(kind: str = typer.Argument(..., help="campaign, results, passport, analysis or manifest")) -> None:
    """Print the JSON Schema of the campaign file or of a result file, for editors and other tools."""
    try:
        out = schema_of(kind)
    except ValueError as err:
        _fail(str(err))
    typer.echo(json.dumps(out, indent=2))
