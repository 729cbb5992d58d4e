"""Write the source notebooks under notebooks/ (outputs stripped, a tagged parameters cell).

The notebooks are the source of truth for readers; this script keeps their cells in one place
for review. Run: .venv/bin/python tools/make_notebooks.py
"""
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

OUT = Path(__file__).resolve().parents[1] / "notebooks"


def params(src: str):
    c = new_code_cell(src)
    c.metadata["tags"] = ["parameters"]
    return c


def nb(cells):
    n = new_notebook(cells=cells)
    n.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    n.metadata["language_info"] = {"name": "python"}
    return n


ARM_PARAMS = '''# Parameters (papermill overrides these). With endpoint = None the notebook starts the arm's
# engine itself, so it also runs on its own in JupyterLab.
campaign_file = "campaigns/quickstart.yaml"
run_dir = None     # None: a scratch run under outputs/<campaign>/interactive-<time>
arm = None         # None: the campaign's first arm
endpoint = None    # e.g. "http://127.0.0.1:8080" when the runner has started the engine
start_engine = True  # False: arithmetic only (a campaign sized for hardware that is not here)
run_id = None'''

OPEN = '''from IPython.display import Markdown, display
import pandas as pd
from stackbook.session import open_arm
from stackbook import workbook

session = open_arm(campaign_file, run_dir=run_dir, arm=arm, endpoint=endpoint, start_engine=start_engine)
display(Markdown(session.describe()))'''

sizing = nb([
    new_markdown_cell("""# 10 · Sizing: does it fit, and how many sequences live at once

Before any timing, arithmetic. Memory must hold the weights plus the cache that the context
demands; if it cannot, no engine choice helps. For this arm's model, precision and device:

* **weights**: parameters × bits per weight, or the exact size of the artifact when known;
* **KV bytes per token**: K and V, per KV head and head dimension, for each layer whose cache grows
  with the context. Linear-attention (Gated DeltaNet) layers keep none; sliding-window layers stop
  growing at their window; an MLA layer keeps one compressed latent;
* **recurrent state per sequence** for hybrid models: a fixed charge per live sequence, whatever
  its length, which is why short-context concurrency on hybrids is lower than a KV-only rule says;
* the **cache pool** (given, or what is left after weights, workspace and activations) and the
  **live sequences** it holds at the protocol's context;
* the **engine's own accounting** of the same pool. Engines round to blocks, split caches per
  slot, reserve state slots; when the engine ran, the figure it reported sits beside the
  prediction, and the gap between them is part of the evidence."""),
    params(ARM_PARAMS),
    new_code_cell(OPEN),
    new_markdown_cell("## The model's geometry\n\nFrom the bundled catalog of public configs, or read from the artifact the engine serves (GGUF metadata, or `config.json`)."),
    new_code_cell('''s = workbook.arm_sizing(session)
pd.Series(s["geometry"]).to_frame("value")'''),
    new_markdown_cell("## The memory budget"),
    new_code_cell('''workbook.budget_table(s)'''),
    new_markdown_cell("## The weights under other precisions\n\nThe exact size of a published artifact beats any bits-per-weight rule: block-quantized formats carry scales, and some tensors (embeddings, the output head) often stay at higher precision."),
    new_code_cell('''workbook.weights_table(session, s)'''),
    new_markdown_cell("""## Why calculators disagree

The same pool gives different answers under different assumptions about the cache and state
precision. Each row below is one common assumption; only the first matches what the reference
implementation keeps."""),
    new_code_cell('''pd.DataFrame(s["assumptions_table"]).set_index("assumption")'''),
    new_markdown_cell("""## The engine's own accounting: predicted against realized

*Predicted* applies this engine's allocation rule to the arithmetic above; *realized* is parsed
from the engine's log and HTTP endpoints after it started (empty when the engine did not run
here). A ratio far from 1 means the engine holds less, or more, than a reader of its flags would
assume."""),
    new_code_cell('''display(Markdown(f"Rule: *{s['predicted_capacity'].get('rule', 'n/a')}*"))
display(workbook.capacity_table(s))
workbook.engine_accounting(s)'''),
    new_markdown_cell("""## The decode roofline

Each generated token reads every weight once, plus the KV cache so far and the recurrent state
(read and written). Memory bandwidth over those bytes bounds single-stream decode speed; the load
sweep reports the measured rate against it. For `this-cpu`, bandwidth is measured at run time."""),
    new_code_cell('''pd.Series({"device": s["hardware"]["name"],
           "bandwidth (GB/s)": round(s["hardware"]["bandwidth_bytes_s"] / 1e9, 1),
           "decode bound at this context (tok/s)": round(s.get("roofline_decode_tok_s") or 0, 1),
           "bandwidth source": s["hardware"]["source"]}).to_frame("value")'''),
])

canaries = nb([
    new_markdown_cell("""# 20 · Canaries: is the output right before anything is timed

A fast stack that answers wrongly is not a candidate. Each check here runs at temperature 0 and
has a machine-checkable answer: text that must appear, a pattern, JSON that must validate against
a schema, or the same greedy reply repeated sequentially and under concurrency. The suite is data
(a versioned YAML file whose hash goes into the passport).

The verdict is **PASS** when every gating check passes, else **HOLD**: a held arm's timings are
never ranked. Checks this small model is known to fail are listed as *expected failures*, shown
here rather than dropped."""),
    params(ARM_PARAMS),
    new_code_cell(OPEN),
    new_code_cell('''result, table = workbook.arm_canaries(session, progress=endpoint is None)
table'''),
    new_code_cell('''display(Markdown(f"## Verdict: **{result['verdict']}**  \\n"
                 f"{result['passed']}/{result['gating_checks']} gating checks passed; "
                 f"expected failures: {result['expected_failures'] or 'none'}; "
                 f"failed: {result['failed'] or 'none'}.  \\n"
                 f"Suite `{result['suite']}` v{result['suite_version']}, sha256 `{result['suite_sha256'][:16]}…`"))
pd.Series(result["counts"]).to_frame("count")'''),
])

sweep = nb([
    new_markdown_cell("""# 30 · Load sweep: latency and throughput as load grows

A closed loop of N clients, each sending its next request the moment its previous reply ends,
for each concurrency level in the protocol. Every request streams; the client stamps each chunk's
arrival, so the figures below can be recomputed under any definition. Warm-up requests run first
at the same concurrency and are recorded but excluded.

Names used: **TTFT** (first content chunk after sending), **TPOT** ((E2E − TTFT) / (N − 1)),
**chunk ITL** (gap between chunks), **E2E** (sent to last byte). **Goodput** counts only requests
that met every SLO bound, and failed requests stay in its denominator. Raw records are appended to
`requests.jsonl` as each request completes, so an interruption loses nothing measured."""),
    params(ARM_PARAMS),
    new_code_cell(OPEN),
    new_code_cell('''sweep = workbook.arm_sweep(session, run_id=run_id, progress=endpoint is None)
display(Markdown(f"Label: **{sweep['label']}** · peak engine memory {sweep['peak_engine_rss_gib']} GiB · "
                 f"errors {sweep['error_counts']}"))
workbook.points_table(sweep)'''),
    new_markdown_cell("""## Was the load what the protocol asked for?

For a closed loop, Little's law (requests in flight = throughput × mean E2E) must come back close to
the configured concurrency; a point where it does not means the client failed to keep its clients
busy, and is marked invalid rather than reported as the engine's number. Output length is checked
too: every request was asked for exactly the protocol's output tokens."""),
    new_code_cell('''display(pd.DataFrame(sweep["load_validity"]).T)
pd.Series(sweep["length_control"]).to_frame("value")'''),
    new_markdown_cell("## What the engine itself counted during each point (its Prometheus `/metrics`)"),
    new_code_cell('''pd.DataFrame(sweep["telemetry"]).round(3)'''),
    new_markdown_cell("## Per-request view"),
    new_code_cell('''from stackbook import plots
requests = workbook.arm_requests(session)
m = requests[requests["phase"] == "measure"].copy()
m["arm"], m["label"] = session.arm.name, sweep["label"]
plots.ttft_distribution({session.arm.name: requests});'''),
    new_code_cell('''m.groupby("concurrency")[["ttft_ms", "tpot_ms", "e2e_ms", "output_tokens"]].describe().T.round(1)'''),
    new_markdown_cell("## The passport\n\nIdentity, protocol, validity and results for this arm, written to `passport.json` and `passport.md`."),
    new_code_cell('''display(Markdown((session.arm_dir / "passport.md").read_text()))'''),
])

analysis = nb([
    new_markdown_cell("""# 40 · Campaign analysis: which arm, under which conditions, with what evidence

This report compares the campaign's arms. Before any comparison it checks that the comparison is
fair: the model, the weight and KV precision, the decoding settings, the input and output lengths,
the arrival pattern and the measurement window must match across arms, and the prefix-cache state
must be stated. An arm that differs in any of these is shown as *not comparable*; an arm whose
canaries did not pass is shown as *HOLD*. Neither is ranked.

Then the figures: latency percentiles and throughput at each load level, throughput against tail
latency, and the TTFT distributions. A stack that wins on aggregate throughput while its tail
latency doubles has lost for an interactive product, so both are always shown together."""),
    params('''run_dir = "outputs/quickstart/reference"  # the run directory to analyse'''),
    new_code_cell('''from pathlib import Path
from IPython.display import Markdown, display
import pandas as pd
from stackbook import analysis, plots
from stackbook.paths import REPO_ROOT
import os
os.chdir(REPO_ROOT)
run = Path(run_dir)
campaign, arms = analysis.load_run(run)
figures = run / "figures"
display(Markdown(f"**Campaign** `{campaign.name}`: {campaign.description}  \\n**Arms:** " +
                 ", ".join(f"`{n}` ({a['arm'].engine.kind})" for n, a in arms.items())))'''),
    new_markdown_cell("## Fairness\n\nEach column must read the same for every arm (values shown as recorded; long ones are JSON)."),
    new_code_cell('''fair = analysis.fairness_table(campaign, arms)
fair.T'''),
    new_markdown_cell("""## Sizing across arms

The same model and pool under each arm's engine: the arithmetic's live sequences, the engine's
allocation rule applied to the same numbers, and (when the engine ran) what it reported."""),
    new_code_cell('''sizing = analysis.sizing_frame(arms)
display(sizing)
plots.sizing_bars(sizing, figures);'''),
    new_markdown_cell("## Correctness gate and capacity\n\nCanary verdicts, and the KV capacity each engine actually allocated next to the arithmetic."),
    new_code_cell('''rows = []
for n, a in arms.items():
    c = a["results"].get("canaries", {})
    sz = a["results"].get("sizing", {})
    rows.append({"arm": n, "canaries": c.get("verdict", "not run"),
                 "gating passed": f"{c.get('passed', 0)}/{c.get('gating_checks', 0)}",
                 "expected failures": ", ".join(c.get("expected_failures", [])) or "-",
                 "KV tokens predicted": sz.get("predicted_capacity", {}).get("kv_tokens"),
                 "KV tokens realized": sz.get("realized_capacity", {}).get("kv_tokens"),
                 "max concurrency (engine)": sz.get("realized_capacity", {}).get("max_concurrency"),
                 "engine ready after (s)": round(a["engine"].get("ready_after_s") or 0, 1)})
pd.DataFrame(rows).set_index("arm")'''),
    new_markdown_cell("## Side by side"),
    new_code_cell('''df = analysis.comparison_frame(arms)
analysis.headline(df)'''),
    new_markdown_cell("## Verdict"),
    new_code_cell('''display(Markdown("\\n".join(f"* {line}" for line in analysis.verdict(df, fair, campaign.protocol.slo))))'''),
    new_markdown_cell("## Figures\n\nSaved under `figures/` beside this notebook."),
    new_code_cell('''plots.latency_vs_load(df, figures, "e2e_ms");'''),
    new_code_cell('''plots.latency_vs_load(df, figures, "ttft_ms");'''),
    new_code_cell('''plots.throughput_vs_concurrency(df, figures);'''),
    new_code_cell('''plots.pareto(df, figures);'''),
    new_code_cell('''plots.ttft_distribution({n: a["requests"] for n, a in arms.items() if not a["requests"].empty}, figures);'''),
    new_markdown_cell("## Passports\n\nThe four parts per arm, as written to `arms/<arm>/passport.md`. Raw evidence: `arms/<arm>/requests.jsonl` (every request, every chunk time) and `arms/<arm>/engine.log`."),
    new_code_cell('''for n, a in arms.items():
    md = a["dir"] / "passport.md"
    display(Markdown(md.read_text() if md.exists() else f"*{n}: no passport (the arm did not run)*"))'''),
])

for name, book in [("10_sizing", sizing), ("20_canaries", canaries), ("30_load_sweep", sweep),
                   ("40_analysis", analysis)]:
    nbformat.write(book, OUT / f"{name}.ipynb")
    print("wrote", OUT / f"{name}.ipynb")
