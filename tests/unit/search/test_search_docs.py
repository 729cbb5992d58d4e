"""The figures docs/search.md quotes are the committed benchmark's, and its goals hold there."""
import json
import re
from pathlib import Path


def test_the_search_figures_in_search_md_are_the_benchmarks():
    result = json.loads(Path("benchmarks/results/search_knee.json").read_text())
    s = result["summary"]
    doc = re.sub(r"\s+", " ", Path("docs/search.md").read_text())
    runs = s["runs"]
    assert s["goals"] == {"hit_rate_at_least_0.9": True, "no_aa_false_accept": True}
    assert f"Each of the {runs} seeded runs" in doc
    assert (
        f"`.venv/bin/python benchmarks/search_knee.py --runs {runs} --json benchmarks/results/search_knee.json`" in doc
    )
    assert (
        f"on {result['date_utc'][:10]} (AMD EPYC, {result['host']['cpus']} CPUs, AVX2; {result['elapsed_s']:.0f} s)"
        in doc
    )
    assert f"drawn again; {s['loads_redrawn']} were" in doc
    assert f"the full grid of {s['grid_configurations']} configurations" in doc
    assert f"**Hit rate {s['hit_rate']:.0%}**" in doc
    assert (f"exact best in {round(s['exact_rate'] * runs)} of {runs} runs, and within the 5% margin of the best "
            f"in {round(s['within_margin_rate'] * runs)}.") in doc
    assert (f"{s['measurements_mean']} on average ({s['configurations_measured_mean']} configurations), against "
            f"the {s['grid_measurements']} of a full grid") in doc
    assert f"That is {s['measurements_over_grid']} of the grid" in doc
    assert f"{s['aa_false_accepts']} false accepts in {s['aa_checks']} checks" in doc
    assert s["accepts_that_lost_goodput"] == 0 and "No accepted change lost goodput" in doc
    assert len(result["misses"]) == 1 and "The one miss is a near-tie" in doc


def test_the_committed_llama_cpp_search_is_quoted_as_recorded():
    folder = Path("outputs/search/llama-cpp")
    steps = [json.loads(x) for x in (folder / "search.jsonl").read_text().splitlines()]
    doc = re.sub(r"\s+", " ", Path("docs/search.md").read_text())
    carried = json.loads((folder / "carried_load.json").read_text())
    met = {p["concurrency"]: f"{p['met']} of {p['requests']}" for p in carried["probes"]}
    assert carried["concurrency"] == 1 and f"one client inside the SLO ({met[1]} requests) and two outside ({met[2]})" \
        in doc
    [control] = [s for s in steps if s["kind"] == "control"]
    [cand] = [s for s in steps if s["kind"] == "candidate"]

    def pct(x):
        return f"{100 * (x - 1):+.1f}%"
    j = control["judgement"]
    assert not control["accepted"] and f"({pct(j['ratio'])}, [{pct(j['lo'])}, {pct(j['hi'])}])" in doc
    j, c = cand["judgement"], cand["change"]
    assert cand["accepted"] and c["changes"] == {"engine.threads": 2}
    assert f"at {c['predicted_gain']:+.0%} (model error {c['model_error']:.0%})" in doc
    assert f"it gave {pct(j['ratio'])} [{pct(j['lo'])}, {pct(j['hi'])}] goodput" in doc
    assert f"missed that step by {abs(j['ratio'] / (1 + c['predicted_gain']) - 1):.0%}" in doc
    assert steps[-1]["kind"] == "stop" and steps[-1]["stop_reason"] == "no candidate is predicted to clear the margin"
    caps = {json.loads(p.read_text())["configuration"]["engine.threads"]: json.loads(p.read_text())
            for p in (folder / "capacity").glob("*.json")}
    for threads, words in ((1, "The default carries"), (2, "the final configuration carries")):
        cap = caps[threads]
        n = cap["concurrency"]
        assert f"{words} {n} client{'' if n == 1 else 's'}" in doc
        assert f"{cap['output_tok_s']:.1f}" in doc and f"(${cap['cost_per_m_output_tokens_usd']:.2f}" in doc
