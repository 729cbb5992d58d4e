"""`stackbook gpu-campaign`: the prepared GPU run (stackbook/gpu_campaign.py), or its CPU rehearsal."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from stackbook.cli_common import fail


def gpu_campaign(device: str = typer.Option("cuda", "--device", help="cuda (the GPU run) or cpu (its rehearsal)"),
                 python: Optional[str] = typer.Option(None, "--python", help="the interpreter that serves: one with "
                                                      "torch (CUDA build on a GPU) and transformers[serving] "
                                                      "(default: the transformers kind's own environment)"),
                 tokenizer: Optional[Path] = typer.Option(None, "--tokenizer", help="a directory with the tokenizer "
                                                          "and config to build the model from (default: the embedded "
                                                          "checkpoint)"),
                 accelerator: Optional[str] = typer.Option(None, "--accelerator", help="the accelerator catalog's "
                                                           "key for sizing (default: matched from the device's name)"),
                 run_id: Optional[str] = typer.Option(None, "--run-id", help="the run's directory name")) -> None:
    """A two-arm transformers campaign (sdpa against eager attention) on a small model it builds, with
    GPU telemetry, energy per output token and memory against sizing, in one folder. Exit 3 where
    --device cuda finds no CUDA."""
    from stackbook.config.errors import CampaignError
    from stackbook.evidence.rundir import check_run_id
    from stackbook.gpu_campaign import run_gpu_campaign
    if device not in ("cuda", "cpu"):
        fail(f"--device {device!r}: give cuda (the GPU run) or cpu (its rehearsal on this CPU)")
    try:
        check_run_id(run_id)
        code = run_gpu_campaign(device, python=python, tokenizer=tokenizer, run_id=run_id, accelerator=accelerator,
                                log=typer.echo)
    except (ValueError, FileNotFoundError, FileExistsError, CampaignError) as err:
        fail(str(err))
    raise typer.Exit(code)
