"""`stackbook search CAMPAIGN`: the search loop on a campaign's system, its steps appended to
search.jsonl (resumed when present) and its report written beside them."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from stackbook.cli_common import fail


def search(campaign: Path = typer.Argument(..., help="a search campaign, e.g. campaigns/search/knee.yaml or "
                                             "campaigns/search/llama-cpp.yaml"),
           check: bool = typer.Option(False, "--check", help="validate the campaign and run nothing"),
           out: Optional[Path] = typer.Option(None, "--out", help="where search.jsonl and search.md go "
                                              "(default: outputs/search/<name>)"),
           seed: int = typer.Option(0, "--seed", help="the seed of the requests' lengths")) -> None:
    """Tune one knob at a time on the bottleneck, each change kept only when measured ahead by the margin."""
    from stackbook.config.errors import CampaignError
    from stackbook.evidence.portable import make_portable
    from stackbook.evidence.rundir import RunDir
    from stackbook.locations import REPO_ROOT
    from stackbook.search.campaign import load_search_campaign
    from stackbook.search.carried_load import NothingCarried, carried_words, read_carried
    from stackbook.search.loop import Plan, run_search
    from stackbook.search.report import report_text

    try:
        c = load_search_campaign(campaign)
    except CampaignError as err:
        fail(str(err))
    s = c.search
    knobs = c.knobs()
    typer.echo(f"{campaign}: {c.system.kind}, knobs {', '.join(k.name for k in knobs)}, "
               f"budget {s.budget.steps} steps / {s.budget.time_s:g} s, {s.rounds} rounds, margin {s.margin:.0%}")
    if check:
        typer.echo("valid; nothing run")
        return
    folder = out or REPO_ROOT / "outputs" / "search" / c.name
    folder.mkdir(parents=True, exist_ok=True)
    try:
        measure, predict, error_floor = c.system.searcher(c.incumbent(), folder, seed)
    except NothingCarried as err:
        fail(str(err))
    plan = Plan(
        knobs=knobs,
        incumbent=c.incumbent(),
        rounds=s.rounds,
        max_rounds=s.max_rounds,
        margin=s.margin,
        confidence=s.confidence,
        max_steps=s.budget.steps,
        max_s=s.budget.time_s,
        error_floor=error_floor,
    )
    steps = run_search(measure, predict, plan, folder / "search.jsonl", seed)
    found = read_carried(folder)
    capacity = c.system.capacity_lines(c.incumbent(), steps[-1].incumbent_after, folder, seed) \
        if steps[-1].kind == "stop" else []
    text = report_text(c.name, steps, knobs, c.incumbent(), carried_words(found) if found else None, capacity)
    (folder / "search.md").write_text(text)
    left = make_portable(RunDir(folder), [])  # engine logs name the cache's paths: kept symbolic, as a run's are
    typer.echo(text + "".join(f"\nabsolute path left: {a}" for a in left))
