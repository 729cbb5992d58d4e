"""The report as a reader sees it: rendered by headless Chromium (the system's package, installed
by `make setup` when missing), its figures must be drawn (decoded, non-zero size, with alt text),
its links to the arm notebooks' pages and raw files must lead to files that exist, and it must
open on its answer: the answer block's five sentences (six for a routing campaign) inside the
first 900 px of a 1,400 x 900 window, no code cell visible, no image wider than its column."""
import json
from pathlib import Path

import nbformat
import pytest
from stackbook.browser import INSTALL_HINT, Chromium, find_chromium, inspect_page
from stackbook.evidence.files import file_sha256
from stackbook.evidence.rundir import RunDir

from tests.support.runs import copy_committed_run_to

pytestmark = pytest.mark.skipif(find_chromium() is None, reason=f"no Chromium: {INSTALL_HINT}")

AVX2_RUN = Path("outputs/quickstart/avx2-host")
ARMS = ("llama-cpp", "vllm-cpu")


@pytest.fixture(scope="module")
def fresh_report(tmp_path_factory) -> RunDir:
    """`stackbook report` over a copy of a committed run's evidence: the analysis executed anew."""
    from stackbook.reports import rerender

    run = RunDir(tmp_path_factory.mktemp("report") / "run")
    copy_committed_run_to(run.path, "quickstart", "avx2-host", ignore=("40_analysis.ipynb", "analysis.json"))
    rerender(run.path)
    return run


def test_rerender_rewrites_the_analysis_and_the_manifest_hashes(fresh_report):
    manifest = json.loads(fresh_report.manifest.read_text())
    assert manifest["analysis"]["status"] == "ok"
    assert manifest["outputs"]["report.html"] == file_sha256(fresh_report.report)
    assert manifest["outputs"]["figures/pareto.png"] == file_sha256(fresh_report.figures / "pareto.png")
    analysis = json.loads(fresh_report.analysis.read_text())
    # That run predates cold prompts on llama-server: its arm served 15% of prompt tokens from cache,
    # all of them the chat template's head every request shares, which the cache check tells apart.
    assert not any(line.startswith("Not comparable") for line in analysis["verdict"]), analysis["verdict"]
    assert next(f for f in analysis["fairness"] if f["arm"] == "llama-cpp")["prefix_cache"].startswith(
        "cold apart from the 24-token template head every request shares (configured cold)")


def test_a_directory_that_is_not_a_run_is_refused(tmp_path):
    from stackbook.reports import rerender

    with pytest.raises(FileNotFoundError, match="not a run directory"):
        rerender(tmp_path)


def test_every_figure_is_drawn_in_the_report(fresh_report):
    page = inspect_page(fresh_report.report)
    saved = sorted(p.name for p in fresh_report.figures.glob("*.png"))
    assert saved == ["e2e_ms_vs_load.png", "e2e_p50_vs_load.png", "headline.png", "interactivity.png",
                     "output_throughput_vs_load.png", "pareto.png", "pareto_intervals.png", "queueing_fit.png",
                     "sizing.png",
                     "throughput_vs_concurrency.png", "tpot_itl_cdf.png", "tpot_ms_vs_load.png", "ttft_cdf.png",
                     "ttft_ms_vs_load.png", "ttft_p50_vs_load.png"]
    assert len(page.images) == len(saved)
    assert not page.broken_images
    assert all(i.natural_width > 300 and i.natural_height > 200 for i in page.images)
    alts = [i.alt for i in page.images]
    # 12 requests a point carry neither a p99 nor a p95: the latency is drawn at p50, and the axis says why
    assert alts[0].startswith("Latency (lower is better): p50 (n=12 a point: too few for a p99) E2E (ms) against "
                              "concurrency (closed loop)")
    assert "TPOT per request (empirical CDF)" in " ".join(alts) and not any(
        a in ("", "figure", "No description has been provided for this image") for a in alts)
    assert page.title == "run · run · stackbook report" or page.title.endswith("· stackbook report")


def test_links_to_arm_notebooks_and_raw_files_resolve(fresh_report):
    page = inspect_page(fresh_report.report)
    assert not page.broken_links, page.broken_links
    inside = [Path(link.href.removeprefix("file://")) for link in page.links]
    targets = {p.relative_to(fresh_report.path.resolve()).as_posix() for p in inside
               if p.is_relative_to(fresh_report.path.resolve())}
    # a copy outside the repository names the teaching notebooks by their place in it, unlinked
    assert all(p.is_relative_to(fresh_report.path.resolve()) for p in inside)
    for arm in ARMS:
        for name in ("10_sizing.html", "20_canaries.html", "30_load_sweep.html", "requests.jsonl",
                     "engine.log", "passport.md"):
            assert f"arms/{arm}/{name}" in targets
    assert not any(t.endswith(".ipynb") for t in targets)  # a reader gets pages, not raw JSON


def test_the_report_opens_on_its_decision_with_no_code_and_figures_inside_the_page(fresh_report):
    with Chromium(width=1400) as browser:
        browser.open(fresh_report.report)
        page = browser.inspect()
        summary = browser.evaluate("document.querySelector('.stackbook-first-screen').innerText")
        made = browser.evaluate("document.querySelector('details.stackbook-made').innerText")
    assert page.layout.decision_top is not None and page.layout.decision_top < 1000
    assert page.layout.visible_code_cells == 0 and page.layout.overflowing_images == []
    assert summary.startswith("Which stack serves smollm2-135m-instruct best on")
    # Both arms comparable; one repetition each decides nothing, and the loads 12 requests cannot hold are named.
    assert "llama-cpp\tllama_cpp\taccepted" in summary and "vllm-cpu\tvllm_cpu\taccepted" in summary
    assert "1\toutput throughput\tllama-cpp vs vllm-cpu\tundecided" in summary
    assert "c4-r0 discarded (on_invalid_load)" in summary and "requests_per_point: 27 can" in summary
    assert "How this was made" in made and 'run_dir = ' not in summary
    # every linked notebook page exists: the arms' three and the attached demand map
    pages = {Path(link.href.removeprefix("file://")).name for link in page.page_links}
    assert {"10_sizing.html", "20_canaries.html", "30_load_sweep.html"} <= pages and not page.broken_links


# Each answer with its bottom edge (CSS px from the page's top) as the browser lays it out.
ANSWER_LINES = """JSON.stringify(Array.from(document.querySelectorAll('#answer li')).map(li => ({
  text: li.innerText.replace(/\\s+/g, ' ').trim(), bottom: li.getBoundingClientRect().bottom + window.scrollY})))"""


def test_the_first_screen_holds_every_answer_at_1400_by_900(fresh_report):
    """Which arm, how sure, inside which SLO, at what cost, on which host: each sentence whole inside
    the top 900 px of a 1,400 px wide window, with the words that answer it."""
    with Chromium(width=1400, height=900) as browser:
        browser.open(fresh_report.report)
        lines = json.loads(browser.evaluate(ANSWER_LINES))
    said = {line["text"].split("? ", 1)[0]: line for line in lines}
    assert list(said) == ["Which arm", "How sure", "Inside which SLO", "At what cost", "On which host"]
    assert all(line["bottom"] <= 900 for line in lines), lines
    keys = {"Which arm": ["llama-cpp"],
            "How sure": ["1 round of every arm", "not recorded in the manifest"],
            "Inside which SLO": ["TTFT ≤ 1500 ms and TPOT ≤ 100 ms for at least 99% of requests",
                                 "vllm-cpu: no load proven inside (the sweep tested up to 8)"],
            "At what cost": ["No prices set in the campaign"],
            "On which host": ["AMD EPYC, 2 CPUs", "quickstart/reference on AMD EPYC, 2 CPUs, AVX-512 BF16"]}
    for question, words in keys.items():
        assert all(w in said[question]["text"] for w in words), (question, said[question]["text"])


def test_an_arm_notebook_page_hides_its_code_and_names_its_parameters(fresh_report):
    with Chromium(width=1400) as browser:
        browser.open(fresh_report.arm("vllm-cpu").notebook("30_load_sweep").with_suffix(".html"))
        page = browser.inspect()
        made = browser.evaluate("document.querySelector('details.stackbook-made').textContent")
    nb = nbformat.read(fresh_report.arm("vllm-cpu").notebook("30_load_sweep"), as_version=4)
    pngs = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert page.layout.visible_code_cells == 0 and not page.broken_images and len(page.images) == len(pngs)
    assert "arm = 'vllm-cpu'" in made and "stackbook run campaigns/quickstart.yaml --run-id" in made


def test_a_missing_figure_and_a_missing_file_are_caught(tmp_path):
    page = tmp_path / "broken.html"
    (tmp_path / "there.txt").write_text("x")
    page.write_text('<html><head><title>t</title></head><body><img src="figures/none.png">'
                    '<a href="there.txt">ok</a><a href="arms/x/requests.jsonl">raw</a>'
                    '<a href="https://example.org/">web</a></body></html>')
    report = inspect_page(page)
    assert [i.natural_width for i in report.broken_images] == [0]
    assert [link.text for link in report.links] == ["ok", "raw"]
    assert [link.text for link in report.broken_links] == ["raw"]


@pytest.mark.parametrize("report", sorted(Path("outputs").glob("*/*/report.html")), ids=str)
def test_committed_reports_draw_their_figures(report):
    """Every committed report (a run's analysis or a comparison) draws one image per figure saved
    beside it, and a run with a sweep has figures."""
    notebook = next(report.parent / n for n in ("40_analysis.ipynb", "60_compare.ipynb")
                    if (report.parent / n).exists())
    nb = nbformat.read(notebook, as_version=4)
    with Chromium(width=1400, height=900) as browser:
        browser.open(report)
        page = browser.inspect()
        answers_json = browser.evaluate(ANSWER_LINES)
    assert not page.broken_images and not page.broken_links
    # the first-screen rule: the answer inside 900 px (a page from before it: the decisions)
    if notebook.stem == "40_analysis":
        if answers := json.loads(answers_json):
            routed = any(a["text"].startswith("Which routing policy?") for a in answers)  # its sixth line
            assert len(answers) == 5 + routed and max(a["bottom"] for a in answers) <= 900, answers
        else:
            assert page.layout.decision_top is not None and page.layout.decision_top < 1000
    assert page.layout.visible_code_cells == 0 and page.layout.overflowing_images == []
    assert not any(link.href.endswith(".ipynb") for link in page.links)
    pngs = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(page.images) == len(pngs) == len(list((report.parent / "figures").glob("*.png")))
    if any(report.parent.glob("arms/*/requests.jsonl")) or notebook.stem == "60_compare":
        assert len(page.images) >= 4


def test_no_committed_page_scrolls_sideways_on_a_1400_px_screen():
    """Every committed report and every arm's sweep page (the widest tables: points, client against
    engine, host cost) fits 1,400 px: no table wider than its box or the window."""
    pages = (sorted(Path("outputs").glob("*/*/report.html"))
             + sorted(Path("outputs").glob("*/*/arms/*/30_load_sweep.html")))
    wide = {}
    with Chromium(width=1400) as browser:
        for page in pages:
            browser.open(page)
            if tables := browser.inspect().layout.overflowing_tables:
                wide[str(page)] = tables
    assert len(pages) > 20 and wide == {}


def test_comparison_report_overlays_the_runs_figures(tmp_path, copy_committed_run):
    """stackbook compare across the committed AVX2-host run and a copy of it on a faster "host"."""
    from stackbook.reports import compare

    other = RunDir(copy_committed_run("quickstart", "avx2-host", to="quickstart/faster-host"))
    results = json.loads(other.arm("vllm-cpu").results.read_text())
    for point in results["sweep"]["points"].values():
        point["output_throughput_tok_s"] *= 4
    other.arm("vllm-cpu").results.write_text(json.dumps(results))
    out = compare([AVX2_RUN, other.path], tmp_path / "cmp")
    verdict = json.loads((out.path / "comparison.json").read_text())["verdict"]
    # Each run decides by its own rule; one repetition per arm leaves both loads undecided.
    assert verdict[0].startswith("avx2-host (output_throughput, its own decision rule): at load 1 llama-cpp and "
                                 "vllm-cpu: undecided; at load 2 llama-cpp and vllm-cpu: undecided")
    assert verdict[-1] == "vllm-cpu: faster-host / avx2-host output throughput 4.00x to 4.00x."
    page = inspect_page(out.report)
    assert len(page.images) == 4 and not page.broken_images and not page.broken_links
    assert sorted(p.name for p in out.figures.glob("*.png")) == [
        "e2e_ms_vs_load.png", "pareto.png", "throughput_vs_concurrency.png", "ttft_ms_vs_load.png"]
