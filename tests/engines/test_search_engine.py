"""`stackbook search` on a live llama-server: the load the incumbent carries found by the
campaign's capacity search, each configuration its own engine start, the step model fitted on two
calibration points, then the baseline and one candidate measured in interleaved rounds. Few, short
requests; no timing is asserted, only that every measurement ran on the engine configured as the
step says and the report was written."""
import json

import pytest
from typer.testing import CliRunner

from stackbook.cli import app

pytestmark = pytest.mark.engine

CAMPAIGN = """
name: search-base
model: {source: embedded}
protocol:
  workload: {kind: synthetic, prompt_tokens: 32, output_tokens: 4}
  arrival: {kind: closed_loop, concurrency: [2]}
  requests_per_point: 39  # the campaign's own sweep would hold c2; the search measures system.requests
  context_length: 512
  warmup_requests: 0
  slo: {ttft_ms: 60000, tpot_ms: 10000, attainment: 0.5}
  capacity: {start: 2, max_load: 2, requests: 39, max_requests: 39, max_probes: 1}
arms:
  - name: llama-cpp
    engine: {kind: llama_cpp, threads: 1, parallel: 2}
"""

SEARCH = """
name: search-test
system: {kind: engine, campaign: BASE, arm: llama-cpp, concurrency: carried, requests: 3}
search: {budget: {steps: 1, time_s: 600}, knobs: [engine.threads], rounds: 2, max_rounds: 2}
"""


def test_a_search_step_on_llama_server(real_engines, tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text(CAMPAIGN)
    search = tmp_path / "search.yaml"
    search.write_text(SEARCH.replace("BASE", str(base)))
    out = tmp_path / "out"
    ran = CliRunner().invoke(app, ["search", str(search), "--out", str(out)])
    assert ran.exit_code == 0, ran.output
    assert "absolute path left" not in ran.output  # engine logs kept with symbolic paths, as a run's are
    steps = [json.loads(x) for x in (out / "search.jsonl").read_text().splitlines()]
    assert [s["kind"] for s in steps][0] == "baseline" and steps[-1]["kind"] == "stop"
    carried = json.loads((out / "carried_load.json").read_text())
    assert (carried["concurrency"], carried["upper"]) == (2, None)
    assert [p["verdict"] for p in carried["probes"]] == ["inside"]
    model = json.loads((out / "step_model.json").read_text())
    assert model["one_client"]["batch"] == 1 and model["clients"]["batch"] == 2
    assert model["fitted"]["threads"] == 1 and model["fitted"]["prefill_steps"] >= 1
    configs = [json.loads(p.read_text()) for p in out.glob("measurements/*/configuration.json")]
    threads = sorted({c["configuration"]["engine.threads"] for c in configs})
    candidate = next((s for s in steps if s["kind"] == "candidate"), None)
    assert threads == ([1, candidate["change"]["changes"]["engine.threads"]] if candidate else [1])
    assert all(c["wall_s"] > 0 for c in configs)  # engine start included, kept for a resumed search
    for folder in out.glob("measurements/*-c*-s*"):
        cfg = json.loads((folder / "configuration.json").read_text())
        log = (folder / "arms" / "llama-cpp" / "engine.log").read_text(errors="replace")
        assert f"system_info: n_threads = {cfg['configuration']['engine.threads']} " in log  # the engine's own word
        recs = [json.loads(x) for x in (folder / "arms" / "llama-cpp" / "capacity_requests.jsonl").open()]
        assert sum(r["phase"] == "measure" for r in recs) >= 3 and all(r["error_class"] == "none" for r in recs)
    report = (out / "search.md").read_text()
    assert "## Final configuration against the default" in report
    assert "Measured at 2 clients in a closed loop: the highest load the incumbent was proven to carry" in report
    assert "- default: capacity inside the SLO: 2 clients (none proven outside), " in report
    # Resumed from nothing but the kept measurements, no engine started: the same steps, seconds included.
    (out / "search.jsonl").unlink()
    again = CliRunner().invoke(app, ["search", str(search), "--out", str(out)])
    assert again.exit_code == 0, again.output
    assert [json.loads(x) for x in (out / "search.jsonl").read_text().splitlines()] == steps
