"""What every command of the command line shares: the refusal that names the fix, and NAME=VALUE options."""
from __future__ import annotations

import typer


def fail(message: str, code: int = 2) -> None:
    typer.secho(message, fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


def name_values(items: list[str], option: str, example: str) -> dict:
    """NAME=VALUE command-line items as a mapping, each value read as YAML (numbers, booleans, lists)."""
    import yaml

    values = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"{option} {item!r}: write NAME=VALUE, e.g. {option} {example}")
        try:
            values[name.strip()] = yaml.safe_load(value)
        except yaml.YAMLError as err:
            raise ValueError(f"{option} {item!r}: the value is not valid YAML "
                             f"({getattr(err, 'problem', None) or err}); "
                             f"quote it, e.g. {option} '{name.strip()}=\"...\"'") from None
    return values
