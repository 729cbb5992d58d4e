"""The notebook sources (jupytext percent files): one parameters cell, no outputs, stable cell
ids; and the notebooks that need no engine still execute with papermill (the arm notebooks run
against real engines in test_end_to_end)."""
import json
import subprocess
import sys

import jupytext
import nbformat
import papermill as pm
import pytest
from stackbook.evidence.rundir import RunDir
from stackbook.notebook_sources import (
    SOURCES_DIR,
    load_notebook,
    read_source,
    source_names,
    source_path,
    twin_path,
    twin_text,
)
from stackbook.notebook_execution import execute_notebook
from stackbook.locations import REPO_ROOT

from tests.support.calibration import endpoint_campaign

NAMES = ["00_decide", "10_sizing", "20_canaries", "30_load_sweep", "40_analysis", "50_demand_map", "60_compare"]


def test_every_source_exists_with_its_ipynb_twin_in_sync():
    assert source_names() == NAMES
    assert all(source_path(n).is_file() for n in NAMES)
    assert sorted(p.stem for p in SOURCES_DIR.glob("*.ipynb")) == NAMES
    for n in NAMES:
        assert twin_path(n).read_text() == twin_text(n), (
            f"notebooks/{n}.ipynb has drifted from notebooks/{n}.py: run `make notebooks` and commit both")


@pytest.mark.parametrize("name", NAMES)
def test_source_parses_with_one_parameters_cell_and_no_outputs(name):
    text = source_path(name).read_text()
    assert '# %% tags=["parameters"]' in text
    raw = jupytext.reads(text, fmt="py:percent")
    # Canonical form: jupytext writes the source back byte for byte (a save from JupyterLab is a no-op).
    assert jupytext.writes(raw, fmt="py:percent") == text
    nb = read_source(source_path(name))
    nbformat.validate(nb)
    assert len(nb.cells) == len(raw.cells) > 3
    assert nb.metadata.kernelspec.name == "stackbook" and "jupytext" not in nb.metadata
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code)
    assert sum("parameters" in c.metadata.get("tags", []) for c in nb.cells) == 1
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith(f"# {name[:2]} · ")


@pytest.mark.parametrize("name", NAMES)
def test_two_reads_give_the_same_cell_ids(name):
    first, second = load_notebook(name), load_notebook(name)
    ids = [c.id for c in first.cells]
    assert ids == [c.id for c in second.cells]
    assert len(set(ids)) == len(ids)
    assert first == second


def test_runner_executes_the_source_and_keeps_its_cell_ids(tmp_path):
    out = tmp_path / "50_demand_map.ipynb"
    assert execute_notebook("50_demand_map", out, {"improvement": 0.5}) > 0
    executed = nbformat.read(out, as_version=4)
    source_ids = [c.id for c in load_notebook("50_demand_map").cells]
    kept = [c.id for c in executed.cells if "injected-parameters" not in c.metadata.get("tags", [])]
    assert kept == source_ids
    assert "Making **runtime** 50% faster" in outputs_text(executed)


def test_demand_map_notebook_moves_the_bottleneck(tmp_path):
    out = tmp_path / "50.ipynb"
    pm.execute_notebook(load_notebook("50_demand_map"), str(out), kernel_name="python3", progress_bar=False)
    text = outputs_text(nbformat.read(out, as_version=4))
    assert "bottleneck **runtime** -> **kernels**; bound 76.9 -> 83.3 requests/s" in text


def outputs_text(nb) -> str:
    parts = []
    for c in nb.cells:
        for o in c.get("outputs", []):
            if o.output_type == "error":
                raise AssertionError(f"{o.ename}: {o.evalue}")
            data = o.get("data", {})
            parts.append(data.get("text/markdown", "") + data.get("text/plain", "") + o.get("text", ""))
    return "\n".join(parts)


def test_decide_notebook_reads_the_worked_example(tmp_path):
    out = tmp_path / "00.ipynb"
    pm.execute_notebook(load_notebook("00_decide"), str(out), kernel_name="python3", progress_bar=False)
    text = outputs_text(nbformat.read(out, as_version=4))
    assert "holds bf16 weights with 36 live sequences" in text and "no need to quantize" in text
    assert "**36 live sequences** of 8,192 tokens, 12 times the peak" in text
    assert "Concurrent users read as **13** (the peak sessions from Little's law)" in text
    assert "SGLang" in text and "pay per token" not in text   # steady volume: not the rule's reason
    assert "owning a card would be buying idle silicon" in text  # but the arithmetic's


def test_decide_notebook_runs_with_other_answers(tmp_path):
    out = tmp_path / "00.ipynb"
    pm.execute_notebook(load_notebook("00_decide"), str(out), kernel_name="python3", progress_bar=False,
                        parameters={"model": "llama-3.1-8b", "platform": "apple", "accelerator": "mac-32gb",
                                    "concurrent_users": 1, "shared_prefix": False, "json_output": False,
                                    "images": True, "thinking": True, "volume": "spiky", "ops_engineers": 0,
                                    "tokens_per_day": 1e9})
    text = outputs_text(nbformat.read(out, as_version=4))
    assert "MLX" in text and "SGLang" not in text
    assert "1 x Apple Mac, 32 GB unified memory holds bf16 weights with 13 live sequences" in text
    assert "images: not established for MLX" in text and "thinking mode: not established for MLX" in text
    assert "thinking multiplies output tokens" in text   # spiky volume and no ops: the managed endpoint
    assert "the cheaper option is the **owned cards**" in text


def test_sizing_notebook_runs_without_an_engine(tmp_path):
    """papermill's own command on the jupytext source, as a user types it from the repository."""
    run_dir = RunDir(tmp_path / "run")
    out = tmp_path / "10.ipynb"
    r = subprocess.run([sys.executable, "-m", "papermill", "notebooks/10_sizing.py", str(out), "--no-progress-bar",
                        "-p", "campaign_file", "campaigns/seed-qwen3.8-27b.yaml", "-p", "run_dir", str(run_dir),
                        "-p", "arm", "vllm", "-p", "start_engine", "False"],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    text = outputs_text(nbformat.read(out, as_version=4))
    assert "no engine: arithmetic only" in text and "34.71" in text
    sizing = json.loads(run_dir.arm("vllm").results.read_text())["sizing"]
    assert sizing["max_live_sequences"] == 36 and sizing["predicted_capacity"]["max_concurrency"] == 34.71
    rows = {r["assumption"]: r["live sequences"] for r in sizing["assumptions_table"]}
    assert list(rows.values())[:4] == [36, 40, 46, 59]


@pytest.mark.parametrize("spelled", ["notebooks/{}.py", "./notebooks/{}.py", "{root}/notebooks/{}.py"])
def test_papermill_reads_a_source_as_its_twin(spelled, monkeypatch):
    """The `papermill.io` entry point: a .py source reads as the notebook its twin holds, however
    the path is spelled; a .py output is refused by name."""
    monkeypatch.chdir(REPO_ROOT)
    nb = pm.iorw.load_notebook_node(spelled.format("60_compare", root=REPO_ROOT))
    twin = nbformat.read(twin_path("60_compare"), as_version=4)
    assert [(c.cell_type, c.source) for c in nb.cells] == [(c.cell_type, c.source) for c in twin.cells]
    with pytest.raises(ValueError, match="write the executed notebook to a .ipynb path"):
        pm.iorw.write_ipynb(nb, str(REPO_ROOT / "notebooks" / "out.py"))
    with pytest.raises(FileNotFoundError, match="no notebook source at notebooks/99_none.py"):
        pm.iorw.load_notebook_node("notebooks/99_none.py")


def test_committed_seed_run_is_complete():
    run = RunDir("outputs/seed-qwen3.8-27b/reference")
    manifest = json.loads(run.manifest.read_text())
    assert manifest["status"] == "complete"
    text = outputs_text(nbformat.read(run.arm("vllm").notebook("10_sizing"), as_version=4))
    for figure in ("53,792,000,000", "17.11", "15.93", "65,536", "153,944,064", "23.300", "36"):
        assert figure in text, figure


@pytest.mark.engine
def test_arm_notebook_starts_its_own_engine_when_opened_alone(real_engines, tmp_path):
    """Without an endpoint, an arm notebook starts the arm's engine itself and stops it when the
    kernel exits (as when opened in JupyterLab)."""
    import psutil

    campaign = tmp_path / "alone.yaml"
    campaign.write_text("""
name: alone
protocol:
  workload: {kind: synthetic, prompt_tokens: 32, output_tokens: 8}
  context_length: 512   # the needle check reads up to the context: its prefill is most of the gate's time
  canaries:
    out_of_scope:
      tool_calls: "free-text chat, no tools"
      multi_turn: "single-turn requests"
      instruction_following: "replies are not judged for wording"
      batch_invariance: "one slot: nothing is batched"
arms:
  - name: llama
    engine: {kind: llama_cpp, parallel: 1}
""")
    run_dir = RunDir(tmp_path / "run")
    out = tmp_path / "20.ipynb"
    pm.execute_notebook(load_notebook("20_canaries"), str(out), kernel_name="python3", progress_bar=False,
                        parameters={"campaign_file": str(campaign), "run_dir": str(run_dir), "arm": "llama"})
    text = outputs_text(nbformat.read(out, as_version=4))
    assert "## Verdict: **PASS**" in text
    engine = json.loads(run_dir.arm("llama").engine_json.read_text())
    assert engine["kind"] == "llama_cpp" and engine["realized_capacity"]["kv_tokens"] == 512
    assert run_dir.arm("llama").engine_log.stat().st_size > 0
    pid = engine["pid"]
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_committed_poisson_run_has_one_statistics_column_per_rate():
    """The per-request view of the sweep notebook, on the committed open-loop run: its three rates
    stay apart (they were pooled when the grouping keyed on concurrency, 0 for every record)."""
    from stackbook.analysis.comparison import load_run
    from stackbook.measure.sweep import load_levels
    from stackbook.steps.sweep import request_stats_by_load

    campaign, arms = load_run("outputs/workloads/reference")
    a = arms["vllm-cpu"]
    stats = request_stats_by_load(a["requests"], load_levels(campaign.protocol_for(a["arm"])))
    assert list(stats.columns) == ["rate0.5", "rate1", "rate2"]
    # 16 measured requests a point, two repetitions pooled per rate (failed requests have no E2E count)
    assert stats.loc[("e2e_ms", "count")].tolist() == [32.0, 32.0, 32.0]


def test_analysis_notebook_runs_under_papermill_as_shipped(tmp_path, copy_committed_run):
    """papermill's own command on the shipped .ipynb, its kernel the one the set-up registers,
    over a copy of the committed Poisson run."""
    run = RunDir(copy_committed_run("workloads", to="run", ignore=("40_analysis.ipynb",)))
    out = tmp_path / "40.ipynb"
    r = subprocess.run([sys.executable, "-m", "papermill", str(twin_path("40_analysis")), str(out),
                        "-p", "run_dir", str(run), "--no-progress-bar"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    text = outputs_text(nbformat.read(out, as_version=4))
    assert "Which stack serves  smollm2-135m-instruct  best on" in text and "campaign  workloads" in text
    summary = next(o for c in nbformat.read(out, as_version=4).cells for o in c.get("outputs", [])
                   if "stackbook-first-screen" in o.get("data", {}).get("text/html", ""))
    assert '<a href="arms/vllm-cpu/10_sizing.html">sizing</a>' in summary["data"]["text/html"]
    assert (run.figures / "pareto.png").stat().st_size > 0


@pytest.mark.parametrize("processes", [1, 2])
def test_sweep_notebook_runs_against_the_calibration_server(tmp_path, processes, start_calibration_server,
                                                            write_campaign):
    """The whole sweep notebook, no engine: an endpoint arm on the zero-latency calibration server,
    two Poisson rates, each its own column of per-request statistics (lightest first); sent from
    the kernel itself, or from two client processes it starts."""
    server = start_calibration_server()
    campaign = write_campaign(endpoint_campaign(
        server.base_url, model="{name: smollm2-135m-instruct, source: embedded}",
        arrival="{kind: poisson, rates: [20, 5]}", requests_per_point=6, warmup_requests=1, processes=processes))
    out = tmp_path / "30.ipynb"
    pm.execute_notebook(load_notebook("30_load_sweep"), str(out), kernel_name="python3", progress_bar=False,
                        parameters={"campaign_file": str(campaign), "run_dir": str(tmp_path / "run"), "arm": "cal"})
    nb = nbformat.read(out, as_version=4)
    outputs_text(nb)  # raises on any cell error
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    # throughput and TTFT per load with their intervals, then TTFT, E2E and TPOT against load per point,
    # throughput, the TTFT and TPOT/ITL CDFs, the lengths, the per-request timeline and throughput
    # over time (an endpoint has no engine process to sample)
    assert len(images) == 11
    assert sorted(p.name for p in (tmp_path / "run" / "arms" / "cal" / "figures").iterdir()) == [
        "e2e_ms_vs_load.png", "lengths.png", "output_throughput_vs_load.png", "request_timeline.png",
        "throughput_over_time.png", "throughput_vs_concurrency.png", "tpot_itl_cdf.png", "tpot_ms_vs_load.png",
        "ttft_cdf.png", "ttft_ms_vs_load.png", "ttft_p50_vs_load.png"]
    alts = [o["metadata"]["image/png"]["alt"] for o in images]
    assert any(a.startswith("Per-request timeline · cal (") for a in alts)
    resources = next(c for c in nb.cells if "engine_resources_over_time" in c.source).outputs[0]
    assert resources["data"]["text/markdown"].startswith("*no engine samples over time: "
                                                         "the engine is a remote endpoint")
    stats = next(c for c in nb.cells if "request_stats_by_load" in c.source).outputs[0].data["text/plain"]
    header, count = stats.splitlines()[0].split(), stats.splitlines()[1].split()
    assert header == ["load", "level", "rate5", "rate20"]
    assert count == ["ttft_ms", "count", "6.0", "6.0"]
    clients = next(c for c in nb.cells if "client_table" in c.source).outputs[1].data["text/plain"]
    assert [line.split()[:2] for line in clients.splitlines()[1:]] == [["rate20-r0", str(processes)],
                                                                       ["rate5-r0", str(processes)]]
