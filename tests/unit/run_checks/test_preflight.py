"""A valid campaign checked against the model and the host: each case the schema cannot see is
refused or warned naming its field, and the duration estimate is the stated arithmetic."""
import copy
import json
import math
import os
import subprocess

import pytest
import yaml
from stackbook.cli import app
from stackbook.config import estimate as estimate_module
from stackbook.config import precision as precision_module
from stackbook.config.loading import parse_campaign
from stackbook.run_checks.preflight import LONG_CAMPAIGN_S, output_problem, preflight
from stackbook.locations import REPO_ROOT
from typer.testing import CliRunner

from tests.support.records import request_record

GiB = 2**30
HOST_24 = (24 * GiB, 20 * GiB, "this host's memory")
QUICKSTART = yaml.safe_load((REPO_ROOT / "campaigns" / "quickstart.yaml").read_text())


@pytest.fixture(autouse=True)
def bf16_host(monkeypatch):
    """A host with native bf16, as the figures below assume (the quickstart's precision is native:
    bf16 there, fp32 on an AVX2 host, with weights and KV twice the bytes)."""
    monkeypatch.setattr(precision_module, "isa_flags", lambda: ["avx2", "avx512_bf16", "avx512f", "f16c", "fma"])


def quickstart(edit=lambda c: None):
    data = copy.deepcopy(QUICKSTART)
    edit(data)
    return parse_campaign(data)


def check(campaign, tmp_path, **kw):
    kw.setdefault("limit", HOST_24)
    return preflight(campaign, tmp_path / "run", runs_root=tmp_path / "none", **kw)


def test_the_committed_quickstart_passes_with_its_arithmetic_estimate(tmp_path):
    out = check(quickstart(), tmp_path)
    assert out.refusals == [] and out.warnings == []
    # closed loop c in [1, 2, 4], 1 warm-up + 32 measured + (c - 1) cool-down requests per point,
    # at most three repetitions (two, and a third while undecided), each request at the SLO's
    # limits: TTFT 1.5 s + 16 tokens x 0.1 s
    per_request = 1.5 + 16 * 0.1
    one = sum(math.ceil((32 + c) / c) * per_request for c in (1, 2, 4))
    assert [e.requests for e in out.estimates] == [3 * (33 + 34 + 36)] * 2
    assert out.estimates[0].seconds == pytest.approx(3 * one)
    assert "arithmetic at the SLO's TTFT 1500 ms and TPOT 100 ms" in out.estimates[0].basis
    [note] = [n for n in out.notes if n.startswith("repetitions:")]
    assert note == (f"repetitions: the estimate is the worst case, 3 repetitions; about {2 * 2 * one / 60:.1f} min "
                    "if every comparison on output_throughput is decided after 2")


def test_context_beyond_the_models_position_embeddings_is_refused(tmp_path):
    out = check(quickstart(lambda c: c["protocol"].update(context_length=10_000_000)), tmp_path,
                check_host=False)
    assert len(out.refusals) == 1
    assert out.refusals[0].startswith("protocol.context_length: 10,000,000 tokens exceeds the model's maximum "
                                      "position embeddings, 8,192")
    assert "Fix: lower context_length to at most 8192" in out.refusals[0]


def test_an_arms_own_context_is_named_where_it_is_set(tmp_path):
    def edit(c):
        c["variables_under_test"] = ["context_length"]
        c["arms"][1]["protocol_overrides"] = {"context_length": 9000}
    out = check(quickstart(edit), tmp_path, check_host=False)
    assert out.refusals[0].startswith("arms[1].protocol_overrides.context_length: 9,000 tokens")


def test_a_kv_pool_beyond_the_hosts_memory_is_refused_and_one_beyond_free_memory_warned(tmp_path):
    out = check(quickstart(lambda c: c["arms"][1]["engine"].update(kv_cache_gib=10000)), tmp_path)
    assert len(out.refusals) == 1
    r = out.refusals[0]
    assert r.startswith("arms[1].engine.kv_cache_gib: the engine of arm vllm-cpu would hold 10,000.3 GiB")
    assert ("this host's memory is 24.0 GiB. "
            "Fix: lower arms[1].engine.kv_cache_gib so the pool stays under 23.7 GiB" in r)
    out = check(quickstart(lambda c: c["arms"][1]["engine"].update(kv_cache_gib=21)), tmp_path)
    assert out.refusals == [] and len(out.warnings) == 1
    assert out.warnings[0].startswith("arms[1].engine.kv_cache_gib:") and "20.0 GiB free now" in out.warnings[0]


def test_llama_cpp_slots_times_context_is_its_pool(tmp_path):
    out = check(quickstart(lambda c: c["arms"][0]["engine"].update(parallel=4096)), tmp_path)
    # 4096 slots x 2048 tokens x 30 layers x 3 KV heads x 64 x 2 (K and V) x 2 bytes = 180 GiB
    assert out.refusals[0].startswith("arms[0].engine.parallel: the engine of arm llama-cpp would hold 180.")
    assert "lower arms[0].engine.parallel or protocol.context_length" in out.refusals[0]
    assert check(quickstart(lambda c: c["arms"][0]["engine"].update(parallel=4096)), tmp_path,
                 check_host=False).refusals == []   # another node's memory is not this host's


def test_a_huge_request_count_is_warned_with_its_estimate(tmp_path):
    out = check(quickstart(lambda c: c["protocol"].update(requests_per_point=1_000_000_000)), tmp_path)
    assert out.refusals == []
    assert out.seconds > LONG_CAMPAIGN_S
    assert out.warnings[0].startswith("protocol.requests_per_point: the campaign would run about ")
    assert "days" in out.report()[0]


def test_the_estimate_uses_an_earlier_runs_measured_speeds(tmp_path):
    run = tmp_path / "runs" / "quickstart" / "earlier"
    arm = run / "arms" / "llama-cpp"
    arm.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"repetitions": {"ran": 3}, "arms": {"llama-cpp": {
        "engine": "llama_cpp", "engine_ready_s": 5.0, "notebooks": {"20_canaries": {"seconds": 15.0}}}}}))
    rec = request_record(run_id="earlier", arm="llama-cpp", first_token_s=0.2, end_s=0.2 + 31 * 0.05,
                         prompt_tokens_client=128, output_tokens_server=32, output_tokens_requested=32)  # TPOT 50 ms
    arm.joinpath("requests.jsonl").write_text(rec.model_dump_json() + "\n")
    out = preflight(quickstart(), tmp_path / "run", runs_root=tmp_path / "runs", limit=HOST_24)
    llama, vllm = out.estimates
    per_request = 0.2 + 16 * 0.05  # the quickstart's 16-token replies at the measured TTFT and TPOT
    # each of 3 repetitions with its engine start (5 s: no slot placed in the manifest), canaries once
    assert llama.seconds == pytest.approx(3 * (sum(math.ceil((32 + c) / c) * per_request for c in (1, 2, 4)) + 5) + 15)
    assert ("TTFT 200 ms and TPOT 50.0 ms (means over its loads; each load's "
            "own where it ran) as measured in" in llama.basis)
    assert "arithmetic" in vllm.basis                  # no records of that arm: the arithmetic
    assert (llama.overhead_s, llama.rounds_before, vllm.rounds_before) == (15.0, 3, None)


def test_a_capacity_search_counts_what_the_earlier_runs_search_took_not_its_whole_budget(tmp_path):
    run = tmp_path / "runs" / "quickstart" / "earlier"
    arm = run / "arms" / "llama-cpp"
    arm.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"arms": {"llama-cpp": {"engine": "llama_cpp"}}}))
    rec = request_record(run_id="earlier", arm="llama-cpp", first_token_s=0.2, end_s=0.2 + 15 * 0.05,
                         output_tokens_server=16, output_tokens_requested=16)
    arm.joinpath("requests.jsonl").write_text(rec.model_dump_json() + "\n")
    arm.joinpath("results.json").write_text(json.dumps({"capacity": {"rounds": {
        "0": {"duration_s": 100.0}, "1": {"duration_s": 140.0}}}}))

    def with_search(c):
        c["protocol"]["slo"]["attainment"] = 0.9
        c["protocol"]["capacity"] = {"start": 1, "tolerance": 1, "max_load": 8, "requests": 40,
                                     "max_requests": 80, "max_probes": 8, "max_wall_s": 600}
    searched = quickstart(with_search)
    llama, vllm = preflight(searched, tmp_path / "run", runs_root=tmp_path / "runs", limit=HOST_24).estimates
    plain, _ = preflight(quickstart(), tmp_path / "run2", runs_root=tmp_path / "runs", limit=HOST_24).estimates
    reps = searched.protocol.repetitions.most
    assert llama.seconds - plain.seconds == pytest.approx(120.0 * reps)   # the mean of its two searches
    assert "the capacity search 120 s a repetition as it took there (its budget 600 s)" in llama.basis
    assert "at most its budget of 600 s" in vllm.basis                    # no earlier search: the budget


def earlier_run(root, name, isa_flags, ttft_s, weights="bf16", mtime=None):
    """An earlier quickstart run of one llama-cpp arm whose requests took `ttft_s` to a first token,
    on a host with these flags, serving `weights`."""
    run = root / "quickstart" / name
    arm = run / "arms" / "llama-cpp"
    arm.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"arms": {"llama-cpp": {"engine": "llama_cpp"}}}))
    (arm / "engine.json").write_text(json.dumps({"host": {"isa_flags": isa_flags}}))
    (arm / "passport.json").write_text(json.dumps({"identity": {"formats": {"weights": weights}}}))
    rec = request_record(run_id=name, arm="llama-cpp", first_token_s=ttft_s, end_s=ttft_s + 15 * 0.05,
                         output_tokens_server=16, output_tokens_requested=16)
    arm.joinpath("requests.jsonl").write_text(rec.model_dump_json() + "\n")
    if mtime:
        os.utime(run / "manifest.json", (mtime, mtime))


def test_the_estimate_prefers_a_run_on_a_host_of_this_type_and_says_which(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    earlier_run(runs, "avx2", ["avx2", "f16c", "fma"], 0.9, mtime=1_000_000)
    earlier_run(runs, "avx512", ["avx2", "avx512_bf16", "avx512f"], 0.3)  # the latest
    monkeypatch.setattr(estimate_module, "isa_flags", lambda: ["avx2", "f16c", "fma"])
    llama = preflight(quickstart(), tmp_path / "run", runs_root=runs, limit=HOST_24).estimates[0]
    assert "TTFT 900 ms" in llama.basis and "runs/quickstart/avx2 (an AVX2 host like this one)" in llama.basis
    monkeypatch.setattr(estimate_module, "isa_flags", lambda: ["avx2", "avx512_bf16", "avx512f"])
    llama = preflight(quickstart(), tmp_path / "run", runs_root=runs, limit=HOST_24).estimates[0]
    assert "TTFT 300 ms" in llama.basis and "(an AVX-512 (BF16) host like this one)" in llama.basis
    monkeypatch.setattr(estimate_module, "isa_flags", lambda: ["avx2", "avx512f"])
    llama = preflight(quickstart(), tmp_path / "run", runs_root=runs, limit=HOST_24).estimates[0]
    assert "TTFT 300 ms" in llama.basis  # no run of this type: the latest, said so
    assert "(an AVX-512 (BF16) host; this one is AVX-512, so expect other speeds)" in llama.basis


def test_the_estimate_prefers_a_run_in_this_runs_precision_and_says_when_it_differs(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    earlier_run(runs, "fp32", ["avx2"], 0.5, weights="fp32", mtime=1_000_000)
    earlier_run(runs, "bf16", ["avx2"], 0.9)  # the latest, in bf16
    monkeypatch.setattr(estimate_module, "isa_flags", lambda: ["avx2"])
    monkeypatch.setattr(precision_module, "isa_flags", lambda: ["avx2"])  # the quickstart's native: fp32
    llama = preflight(quickstart(), tmp_path / "run", runs_root=runs, limit=HOST_24).estimates[0]
    assert "TTFT 500 ms" in llama.basis and "runs/quickstart/fp32 (an AVX2 host like this one)" in llama.basis
    (runs / "quickstart" / "fp32" / "arms" / "llama-cpp" / "requests.jsonl").unlink()
    llama = preflight(quickstart(), tmp_path / "run", runs_root=runs, limit=HOST_24).estimates[0]
    assert "(an AVX2 host like this one; in bf16, where this run serves fp32)" in llama.basis


def test_an_output_path_that_cannot_be_written_is_named(tmp_path):
    blocker = tmp_path / "outputs"
    blocker.write_text("a file")
    assert "is a file where the run directory should go" in output_problem(blocker / "c" / "run")
    assert output_problem(tmp_path / "fresh" / "run") is None


@pytest.fixture
def read_only_dir(tmp_path):
    """A read-only bind mount (refuses root too), where this host lets us mount."""
    target = tmp_path / "ro"
    target.mkdir()
    r = subprocess.run(["mount", "--bind", "-o", "ro", str(tmp_path), str(target)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"no read-only mount here: {r.stderr.decode().strip()[:200]}")
    yield target
    subprocess.run(["umount", str(target)], check=True)


def test_a_read_only_output_directory_is_refused(read_only_dir):
    assert "cannot be written (Read-only file system)" in output_problem(read_only_dir / "campaign" / "run")


def test_run_check_prints_refusals_with_their_field_and_no_traceback(tmp_path):
    data = copy.deepcopy(QUICKSTART)
    data["protocol"]["context_length"] = 10_000_000
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    r = CliRunner().invoke(app, ["run", "--check", str(path)])
    assert r.exit_code == 2 and isinstance(r.exception, SystemExit)   # an exit, not a crash
    assert "the campaign cannot run here (2 problem(s))" in r.output  # the context, and its KV on this host
    assert "protocol.context_length: 10,000,000 tokens" in r.output and "Traceback" not in r.output
    ok = CliRunner().invoke(app, ["run", "--check", str(REPO_ROOT / "campaigns" / "quickstart.yaml")])
    assert ok.exit_code == 0 and "estimated duration:" in ok.output


def test_a_committed_run_reads_as_its_host_type_even_without_recorded_flags():
    from stackbook.evidence.rundir import RunDir
    from stackbook.host import isa_class

    kinds = {"llama-cpp": "llama_cpp", "vllm-cpu": "vllm_cpu"}
    # avx2-host predates the host's flags in engine.json: llama-server's own system_info line says AVX2
    assert isa_class(estimate_module.run_isa(RunDir(REPO_ROOT / "outputs/quickstart/avx2-host"), kinds)) == "AVX2"
    assert isa_class(estimate_module.run_isa(RunDir(REPO_ROOT / "outputs/quickstart/reference"),
                                             kinds)) == "AVX-512 (BF16)"


def test_a_slots_engine_start_and_stop_is_read_from_where_the_earlier_rounds_placed_it():
    """Round 0 runs a then b, round 1 b then a; each slot ends where the next begins. a's first slot
    also held its sizing and canaries (30 s), which are not a slot's overhead."""
    from stackbook.config.estimate import slot_overhead

    arms = {"a": {"notebooks": {"10_sizing": {"seconds": 5.0}, "20_canaries": {"seconds": 25.0}},
                  "repetition_log": {"0": {"sweep_seconds": 100.0, "finished_unix": 1140.0},
                                     "1": {"sweep_seconds": 100.0, "finished_unix": 1480.0}}},
            "b": {"repetition_log": {"0": {"sweep_seconds": 80.0, "finished_unix": 1260.0},
                                     "1": {"sweep_seconds": 80.0, "finished_unix": 1370.0}}}}
    manifest = {"arms": arms, "repetitions": {"rounds": [
        {"round": 0, "order": ["a", "b"], "started_unix": 1000.0},
        {"round": 1, "order": ["b", "a"], "started_unix": 1260.0}]}}
    assert slot_overhead(manifest, "a") == pytest.approx(((140 - 100 - 30) + (110 - 100)) / 2)
    assert slot_overhead(manifest, "b") == pytest.approx(((120 - 80) + (110 - 80)) / 2)
    assert slot_overhead({"arms": arms}, "a") is None
