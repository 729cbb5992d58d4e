"""Load-generator fidelity, side by side in one run: stackbook's client and `vllm bench serve`
(a peer harness, run as-is from the vLLM-CPU environment) against

1. the zero-latency calibration server: the highest constant rate each client holds with p99
   schedule lag <= 5 ms, measured on the *server* side from request arrival times (the same
   instrument for both clients), and each client's TTFT floor;
2. the real vLLM-CPU engine on the embedded model, same workload: TTFT and TPOT medians of both
   tools, and stackbook's means against the engine's own Prometheus histograms.

Run: .venv/bin/python benchmarks/fidelity.py   (about 6 minutes; writes benchmarks/results/fidelity.json)
Timings are printed as ratios measured in this one run; nothing here is a pass/fail test.

`--part streams` (a few minutes; writes benchmarks/results/fidelity_streams.json): hundreds of
concurrent streams against the paced calibration server, whose true TTFT and inter-token gap
are known and whose every send is recorded: stackbook (from one and from N client processes)
and `vllm bench serve` side by side at each concurrency, server and clients on separate cores.
"""
from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
from stackbook.config.loading import load_campaign
from stackbook.engines import adapter_for
from stackbook.engines.vllm_cpu import VllmCpuAdapter
from stackbook.harness.fidelity import highest_rate_held, ratio, server_lag_ms, verdicts
from stackbook.harness.selftest import start_server
from stackbook.harness.stream_fidelity import (
    ROUNDS,
    STREAM_LADDER,
    TOKENS,
    TRUTH,
    percentiles,
    core_plan,
    paced_log,
    pinned,
    stream_point,
    truth_summary,
)
from stackbook.loadgen.arrivals import constant_schedule
from stackbook.loadgen.drivers import Target, run_closed_loop, run_open_loop
from stackbook.loadgen.workload import (
    ApproximateTokenizer,
    PromptSpec,
    client_tokenizer,
    synthetic_prompts,
)
from stackbook.locations import REPO_ROOT
from stackbook.measure.metric_definitions import schedule_lag_ms
from stackbook.measure.metrics import request_metrics
from stackbook.measure.telemetry import (
    HISTOGRAMS,
    histogram_mean_ms,
    metrics_delta,
    scrape_metrics,
)

RATES = [100, 200, 400, 600, 800, 1000, 1200, 1600, 2000]
OUT = REPO_ROOT / "benchmarks" / "results" / "fidelity.json"

# `vllm bench serve` asks importlib for the distribution "vllm"; the CPU build is "vllm-cpu".
LAUNCHER = '''import importlib.metadata as md
_version = md.version
md.version = lambda name: _version("vllm-cpu") + "+cpu" if name == "vllm" else _version(name)
if __name__ == "__main__":
    import sys
    from vllm.entrypoints.cli.main import main
    sys.exit(main())
'''


def arrivals(url: str) -> list[float]:
    return httpx.get(url + "/arrivals", timeout=10).json()


def vllm_bench(workdir: Path, url: str, model: str, tokenizer_dir: str, n: int, rate: float | str,
               input_len: int, output_len: int, max_concurrency: int | None = None,
               dataset: Path | None = None, tag: str = "") -> dict:
    launcher = workdir / "vllm_bench_launcher.py"
    launcher.write_text(LAUNCHER)
    result = workdir / f"vb-{rate}-{n}{tag}.json"
    cmd = [str(VllmCpuAdapter.installed_executable()), str(launcher), "bench", "serve", "--backend", "openai-chat",
           "--base-url", url,
           "--endpoint", "/v1/chat/completions", "--model", model, "--tokenizer", tokenizer_dir,
           *(["--dataset-name", "sharegpt", "--dataset-path", str(dataset), "--sharegpt-output-len", str(output_len),
               "--disable-shuffle"] if dataset else
             ["--dataset-name", "random", "--random-input-len", str(input_len), "--random-output-len",
              str(output_len)]),
           "--num-prompts", str(n), "--request-rate", str(rate), "--burstiness", "1000000", "--ignore-eos",
           "--seed", "0", "--disable-tqdm", "--save-result", "--result-dir", str(workdir),
           "--result-filename", result.name, "--percentile-metrics", "ttft,tpot,itl,e2el",
           "--metric-percentiles", "50,99", "--temperature", "0", "--save-detailed"]
    if max_concurrency:
        cmd += ["--max-concurrency", str(max_concurrency)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=workdir, timeout=900)
    if r.returncode != 0 or not result.exists():
        raise RuntimeError(f"vllm bench serve failed ({r.returncode}):\n{r.stdout[-1500:]}\n{r.stderr[-1500:]}")
    return json.loads(result.read_text())


def prompts(n: int) -> list[PromptSpec]:
    return [PromptSpec(i, [{"role": "user", "content": "calibrate"}], 1) for i in range(n)]


def calibration_part(workdir: Path, hf_dir: str) -> dict:
    proc, url = start_server()
    out: dict = {"ladder": []}
    try:
        tok = ApproximateTokenizer()
        t = Target(url, "calibration", {"temperature": 0.0}, {"max_tokens": 16}, timeout_s=60)
        for rate in RATES:
            n = max(150, int(rate * 3))
            row = {"rate_rps": rate, "requests": n}
            arrivals(url)
            recs = run_open_loop(t, prompts(n), tok, schedule=constant_schedule(rate, n), warmup=0, writer=None,
                                 base={"run_id": "fidelity", "arm": "calibration", "point": f"rate{rate}",
                                       "concurrency": 0})
            lag = server_lag_ms(arrivals(url), rate)
            row["stackbook_server_lag_p99_ms"] = round(float(np.percentile(lag, 99)), 2)
            row["stackbook_client_lag_p99_ms"] = round(float(np.percentile([schedule_lag_ms(r) for r in recs], 99)), 2)
            row["stackbook_errors"] = sum(not r.ok for r in recs)
            arrivals(url)
            vb = vllm_bench(workdir, url, "calibration", hf_dir, n, rate, 32, 16)
            row["vllm_bench_errors"] = n - int(vb.get("completed", 0))
            got = arrivals(url)
            got = got[-n:]  # the peer sends one test request before its run
            lag = server_lag_ms(got, rate)
            row["vllm_bench_server_lag_p99_ms"] = round(float(np.percentile(lag, 99)), 2)
            out["ladder"].append(row)
            print(row, flush=True)
        out["max_rate_held_rps"] = {
            "stackbook": highest_rate_held(out["ladder"], "stackbook_server_lag_p99_ms", "stackbook_errors"),
            "vllm bench serve": highest_rate_held(out["ladder"], "vllm_bench_server_lag_p99_ms", "vllm_bench_errors")}
        # TTFT floor: one request at a time, 100 requests.
        floor = run_closed_loop(t, prompts(100), tok, concurrency=1, warmup=5, writer=None,
                                base={"run_id": "fidelity", "arm": "calibration", "point": "floor", "concurrency": 1})
        sb = [request_metrics(r)["ttft_ms"] for r in floor if r.phase == "measure"]
        vb = vllm_bench(workdir, url, "calibration", hf_dir, 100, "inf", 32, 16, max_concurrency=1)
        out["ttft_floor_ms_p50"] = {"stackbook": round(statistics.median(sb), 3),
                                    "vllm bench serve": round(vb["median_ttft_ms"], 3)}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
    return out


def engine_part(workdir: Path) -> dict:
    campaign = load_campaign(REPO_ROOT / "campaigns" / "quickstart.yaml")
    arm = campaign.arm("vllm-cpu")
    adapter = adapter_for(campaign, arm, log_path=workdir / "engine.log")
    hf_dir = str(adapter.artifacts.hf_dir)
    tok = client_tokenizer(hf_dir)
    n, conc, in_len, out_len, rounds = 24, 2, 128, 64, 2
    workload = campaign.protocol.workload.model_copy(update={"prompt_tokens": in_len, "output_tokens": out_len})
    # One prompt set for both tools: vllm bench serve reads it in the ShareGPT layout (its custom
    # JSONL reader needs pandas, absent from the engine's environment) and sends each prompt as the
    # user message, in file order.
    prompts = synthetic_prompts(workload, tok, n, seed=7)
    dataset = workdir / "prompts.json"
    dataset.write_text(json.dumps([{"conversations": [{"from": "human", "value": p.messages[-1]["content"]},
                                                      {"from": "gpt", "value": "unused reference answer"}]}
                                   for p in prompts]))
    sb_rows, vb_runs, engine, flushes = [], [], {"stackbook": [], "vllm bench serve": []}, []
    with adapter:
        target = Target(adapter.base_url, adapter.served_name,
                        adapter.sampling_fields(campaign.protocol.decoding.resolved()),
                        adapter.output_length_fields(out_len), timeout_s=120)
        warm = synthetic_prompts(workload, tok, 2, seed=99)
        run_closed_loop(target, warm, tok, concurrency=1, warmup=0, writer=None,
                        base={"run_id": "fidelity", "arm": "vllm-cpu", "point": "warm", "concurrency": 1})
        # Alternate the tools (A B A B) so a drift of the machine does not land on one of them.
        for rnd in range(rounds):
            flushes.append(adapter.reset_prefix_cache(httpx.Client(timeout=10)))
            before = scrape_metrics(adapter.base_url)
            recs = run_closed_loop(target, prompts, tok, concurrency=conc, warmup=0, writer=None,
                                   base={"run_id": "fidelity", "arm": "vllm-cpu", "point": f"c{conc}-{rnd}",
                                         "concurrency": conc})
            sb_rows += [request_metrics(r) for r in recs if r.ok]
            engine["stackbook"].append(metrics_delta(before, scrape_metrics(adapter.base_url)))
            flushes.append(adapter.reset_prefix_cache(httpx.Client(timeout=10)))
            before = scrape_metrics(adapter.base_url)
            vb_runs.append(vllm_bench(workdir, adapter.base_url, adapter.served_name, hf_dir, n, "inf", in_len, out_len,
                                      max_concurrency=conc, dataset=dataset, tag=f"-r{rnd}"))
            engine["vllm bench serve"].append(metrics_delta(before, scrape_metrics(adapter.base_url)))
    sb_ttft = statistics.median(r["ttft_ms"] for r in sb_rows)
    sb_tpot = statistics.median(r["tpot_ms"] for r in sb_rows)
    vb_ttft = statistics.median(x for vb in vb_runs for x in vb["ttfts"]) * 1000
    vb_tpot = statistics.median(_tpots(vb_runs))
    pooled = {who: {k: sum(d.get(k, 0.0) for d in deltas) for k in {k for d in deltas for k in d}}
              for who, deltas in engine.items()}
    hist = {who: {kind: histogram_mean_ms(delta, suffix)[0] for kind, suffix in HISTOGRAMS.items()}
            for who, delta in pooled.items()}
    vb_mean_ttft = statistics.mean(x for vb in vb_runs for x in vb["ttfts"]) * 1000
    return {
        "workload": {"requests_per_round": n, "rounds": rounds, "concurrency": conc, "prompt_tokens": in_len,
                     "output_tokens": out_len,
                     "prompts": "the same synthetic prompts for both tools, in the same order",
                     "prefix_cache_before_each_run": flushes},
        "median_ttft_ms": {"stackbook": round(sb_ttft, 1), "vllm bench serve": round(vb_ttft, 1)},
        "median_tpot_ms": {"stackbook": round(sb_tpot, 2), "vllm bench serve": round(vb_tpot, 2)},
        "mean_ttft_ms": {"stackbook": round(statistics.mean(r["ttft_ms"] for r in sb_rows), 1),
                         "engine histogram during stackbook": _r(hist["stackbook"]["ttft"], 1),
                         "vllm bench serve": round(vb_mean_ttft, 1),
                         "engine histogram during vllm bench serve": _r(hist["vllm bench serve"]["ttft"], 1)},
        "mean_tpot_ms": {"stackbook": round(statistics.mean(r["tpot_ms"] for r in sb_rows), 2),
                         "engine histogram (ITL) during stackbook": _r(hist["stackbook"]["itl"], 2),
                         "vllm bench serve": round(statistics.mean(_tpots(vb_runs)), 2),
                         "engine histogram (ITL) during vllm bench serve": _r(hist["vllm bench serve"]["itl"], 2)},
        "note": "the engine's TTFT histogram starts when its engine core receives the request, after the API "
                "server has parsed, templated and tokenized it; the clients' TTFT includes that front-end time",
    }


def _tpots(vb_runs: list[dict]) -> list[float]:
    """Per-request TPOT of vllm bench serve's own records: (latency - ttft) / (output_len - 1), ms."""
    out = []
    for vb in vb_runs:
        for lat, ttft, n in zip(vb["latencies"], vb["ttfts"], vb["output_lens"]):
            if n > 1:
                out.append((lat - ttft) / (n - 1) * 1000)
    return out or [vb["median_tpot_ms"] for vb in vb_runs]


def _r(x, nd):
    return round(x, nd) if x is not None else None


def summarize(cal: dict | None, eng: dict | None) -> dict:
    out = {}
    if cal:
        held = cal["max_rate_held_rps"]
        out["rate_held_ratio_stackbook_over_vllm_bench"] = ratio(held["stackbook"], held["vllm bench serve"])
        out["ttft_floor_ratio_stackbook_over_vllm_bench"] = ratio(cal["ttft_floor_ms_p50"]["stackbook"],
                                                                  cal["ttft_floor_ms_p50"]["vllm bench serve"])
    if eng:
        ttft, tpot = eng["mean_ttft_ms"], eng["mean_tpot_ms"]
        out.update({
            "engine_median_ttft_ratio": ratio(eng["median_ttft_ms"]["stackbook"],
                                              eng["median_ttft_ms"]["vllm bench serve"]),
            "engine_median_tpot_ratio": ratio(eng["median_tpot_ms"]["stackbook"],
                                              eng["median_tpot_ms"]["vllm bench serve"]),
            "stackbook_vs_engine_histogram_ttft_ratio": ratio(ttft["stackbook"],
                                                              ttft["engine histogram during stackbook"]),
            "stackbook_vs_engine_histogram_tpot_ratio": ratio(tpot["stackbook"],
                                                              tpot["engine histogram (ITL) during stackbook"]),
            "vllm_bench_vs_engine_histogram_ttft_ratio": ratio(ttft["vllm bench serve"],
                                                               ttft["engine histogram during vllm bench serve"]),
            "vllm_bench_vs_engine_histogram_tpot_ratio": ratio(tpot["vllm bench serve"],
                                                               tpot["engine histogram (ITL) during vllm bench serve"]),
        })
    return out


STREAMS_OUT = REPO_ROOT / "benchmarks" / "results" / "fidelity_streams.json"


def vllm_bench_streams(workdir: Path, url: str, hf_dir: str, streams: int) -> dict:
    """`vllm bench serve` as a closed loop of `streams` against the paced server: its own figures
    beside the truth of the same streams (its one test request before the run left out)."""
    paced_log(url)
    load0 = os.getloadavg()[0]
    vb = vllm_bench(workdir, url, "calibration", hf_dir, streams * ROUNDS, "inf", 16, TOKENS,
                    max_concurrency=streams, tag=f"-streams{streams}")
    log = sorted(paced_log(url).values(), key=lambda d: d["arrival"])[1:]
    ttft = [x * 1000 for x in vb["ttfts"] if x]
    tpot = _tpots([vb])
    itl = [g * 1000 for gaps in vb["itls"] for g in gaps]
    return {"streams": streams, "requests": int(vb.get("completed", 0)),
            "errors": streams * ROUNDS - int(vb.get("completed", 0)),
            "client": {**percentiles(ttft, "ttft_ms"), **percentiles(tpot, "tpot_ms"), **percentiles(itl, "itl_ms")},
            "truth": truth_summary(log), "load_average_1m": [round(load0, 2), round(os.getloadavg()[0], 2)]}


def streams_part(workdir: Path, hf_dir: str, ladder: list[int], processes: int) -> dict:
    plan = core_plan()
    proc, url = start_server(TRUTH, cpu=plan["server"][0] if plan["separate"] else None)
    rows = []
    peer = VllmCpuAdapter.installed_executable().exists()
    try:
        with pinned(plan["client"] if plan["separate"] else []):
            for n in ladder:
                row = {"streams": n, "stackbook": stream_point(url, n, 1)}
                if processes > 1:
                    row["stackbook_processes"] = stream_point(url, n, processes)
                if peer:
                    row["vllm bench serve"] = vllm_bench_streams(workdir, url, hf_dir, n)
                for who in ("stackbook", "stackbook_processes", "vllm bench serve"):
                    if who in row:
                        r = row[who]
                        r["error_ms"] = {k: _delta(r["client"].get(k), r["truth"].get(k)) for k in r["client"]}
                rows.append(row)
                print(json.dumps({k: (v if not isinstance(v, dict) else {"client": v["client"], "truth": v["truth"]})
                                  for k, v in row.items()}), flush=True)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
    return {"truth": TRUTH.model_dump(), "tokens_per_stream": TOKENS, "requests_per_stream": ROUNDS,
            "stackbook_measures": "every request after each stream's first (the first round, all streams starting "
                                  "at once, is the warm-up)",
            "vllm_bench_measures": "every request it sent (it has no warm-up)",
            "cores": plan, "client_processes": processes, "peer_ran": peer, "rows": rows}


def _delta(a, b):
    return round(a - b, 3) if a is not None and b is not None else None


def host_record(command: str) -> dict:
    from stackbook.host import cpu_model, isa_flags
    return {"command": command, "cpu_model": cpu_model(), "logical_cpus": os.cpu_count(), "isa_flags": isa_flags(),
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()], "measured_unix": time.time()}


def main() -> None:
    import argparse
    ap = argparse.ArgumentParser(description="stackbook's client against vllm bench serve, side by side")
    ap.add_argument("--part", choices=["all", "calibration", "engine", "streams"], default="all",
                    help="a single part prints its figures and leaves the committed result alone (streams: "
                         "writes its own result)")
    ap.add_argument("--streams", default=",".join(map(str, STREAM_LADDER)), help="streams part: concurrencies")
    ap.add_argument("--processes", type=int, default=2, help="streams part: also from this many client processes")
    args = ap.parse_args()
    part = args.part
    if part == "streams":
        import sys
        host = host_record(" ".join(["benchmarks/fidelity.py", *sys.argv[1:]]))
        from stackbook.model.artifacts import embedded_artifacts
        with tempfile.TemporaryDirectory() as d:
            out = streams_part(Path(d), str(embedded_artifacts().hf_dir), [int(x) for x in args.streams.split(",")],
                               args.processes)
        result = {"host": host | {"load_average_at_end": [round(x, 2) for x in os.getloadavg()]}, **out}
        STREAMS_OUT.parent.mkdir(parents=True, exist_ok=True)
        STREAMS_OUT.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {STREAMS_OUT}")
        return
    with tempfile.TemporaryDirectory() as d:
        workdir = Path(d)
        from stackbook.model.artifacts import embedded_artifacts
        hf_dir = str(embedded_artifacts().hf_dir)
        cal = calibration_part(workdir, hf_dir) if part in ("all", "calibration") else None
        eng = engine_part(workdir) if part in ("all", "engine") else None
    summary = summarize(cal, eng)
    result = {"calibration_server": cal, "vllm_cpu_engine": eng, "summary": summary, "verdicts": verdicts(summary),
              "machine": f"{os.cpu_count()} CPUs; client, server and engine share them",
              "measured_unix": time.time()}
    if part == "all":
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(json.dumps(result, indent=2) + "\n")
    else:
        print(json.dumps(result, indent=2))
    print(json.dumps({"summary": summary, "verdicts": verdicts(summary)}, indent=2))


if __name__ == "__main__":
    main()
