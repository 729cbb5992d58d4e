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
