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
from stackbook.steps.session import open_arm
from stackbook.steps import canaries as canaries_step, sizing as sizing_step, sweep as sweep_step

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
    new_code_cell('''s = sizing_step.arm_sizing(session)
pd.Series(s["geometry"]).to_frame("value")'''),
    new_markdown_cell("## The memory budget"),
    new_code_cell('''sizing_step.budget_table(s)'''),
    new_markdown_cell("## The weights under other precisions\n\nThe exact size of a published artifact beats any bits-per-weight rule: block-quantized formats carry scales, and some tensors (embeddings, the output head) often stay at higher precision."),
    new_code_cell('''sizing_step.weights_table(session, s)'''),
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
display(sizing_step.capacity_table(s))
sizing_step.engine_accounting(s)'''),
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
    new_code_cell('''result, table = canaries_step.arm_canaries(session, progress=endpoint is None)
table'''),
    new_code_cell('''display(Markdown(f"## Verdict: **{result['verdict']}**  \\n"
                 f"{result['passed']}/{result['gating_checks']} gating checks passed; "
                 f"expected failures: {result['expected_failures'] or 'none'}; "
                 f"failed: {result['failed'] or 'none'}.  \\n"
                 f"Suite `{result['suite']}` v{result['suite_version']}, sha256 `{result['suite_sha256'][:16]}…`"))
pd.Series(result["counts"]).to_frame("count")'''),
    new_markdown_cell("""## What this endpoint can do

Observed, not assumed: whether the stream reports token usage, whether the output-length
controls are honoured (without them two arms can generate different lengths and the comparison
is void), how many tokens arrive per stream chunk (chunk gaps are not token gaps when it is above
one), whether metrics and a prefix-cache reset are available, and the context actually served."""),
    new_code_cell('''pd.Series(result["probe"], dtype=object).to_frame("observed")'''),
])

sweep = nb([
    new_markdown_cell("""# 30 · Load sweep: latency and throughput as load grows

Load arrives as the protocol says: a closed loop of N clients (each sends its next request the
moment its previous reply ends), or an open loop that sends on a schedule (constant, Poisson,
gamma or a replayed trace) whatever the replies are doing. Every request streams; the client
stamps the arrival of each chunk's bytes, so the figures below can be recomputed under any
definition. Warm-up and cool-down requests run at the same load and are recorded but excluded.

Names used: **TTFT** (first content chunk after sending), **TPOT** ((E2E − TTFT) / (N − 1), N from
the server's usage), **chunk ITL** (gap between chunks), **E2E** (sent to last byte), **normalized
E2E** (E2E / N). **Goodput** counts only requests that met every SLO bound, and failed requests
stay in its denominator. Raw records are appended to `requests.jsonl` as each request completes,
so an interruption loses nothing measured."""),
    params(ARM_PARAMS),
    new_code_cell(OPEN),
    new_markdown_cell("""## The workload

What every request of this arm looked like, and what the prefix cache held when each point
began. The cache state is part of the protocol: a cache left warm by the previous point can make
a later point look several times faster than it is."""),
    new_code_cell('''sweep_step.workload_table(session)'''),
    new_code_cell('''sweep = sweep_step.arm_sweep(session, run_id=run_id, progress=endpoint is None)
display(Markdown(f"Label: **{sweep['label']}** · peak engine memory {sweep['peak_engine_rss_gib']} GiB · "
                 f"errors {sweep['error_counts']}"))
sweep_step.points_table(sweep)'''),
    new_markdown_cell("""## Was the load what the protocol asked for?

For a closed loop, Little's law (requests in flight = throughput × mean E2E) must come back close to
the configured concurrency; for an open loop, the achieved rate must match the schedule and no send
may lag its deadline by more than 5 ms at p99. A point that fails is the client's number, not the
engine's: it is marked invalid and discarded by the preregistered rule. Output length is checked
too: each request asked for a stated number of tokens, and shorter replies are counted."""),
    new_code_cell('''display(pd.DataFrame(sweep["load_validity"]).T)
pd.Series(sweep["length_control"]).to_frame("value")'''),
    new_markdown_cell("""## Prefix cache and accelerator, per point

The flush (and priming, for a warm cache) done before each point, then what the cache served:
the engine's own hit counters where it exports them, and the cached prompt tokens its replies
reported. GPU memory, power and utilisation come from NVML when a GPU is present."""),
    new_code_cell('''display(sweep_step.prefix_cache_table(sweep))
pd.Series(sweep["gpu_telemetry"], dtype=object).to_frame("GPU telemetry")'''),
    new_markdown_cell("## What the engine itself counted during each point (its Prometheus `/metrics`)"),
    new_code_cell('''pd.DataFrame(sweep["telemetry"]).round(3)'''),
    new_markdown_cell("""## Client against the engine's own clock

While each point ran, a separate process read the engine's gauges (requests running and waiting,
KV-cache use) once a second. Where the engine keeps latency histograms, their means over the point
sit beside the client's: the client's TTFT also holds the engine front end's parsing and
tokenization, so a gap there is that time, not a measurement error."""),
    new_code_cell('''sweep_step.engine_truth_table(sweep)'''),
    new_markdown_cell("""## The same requests under other tools' definitions

The same label means different numbers in different tools: vLLM's ITL is a gap between stream
events, GuideLLM's and AIPerf's ITL is a per-request average, and GuideLLM's TPOT counts the first
token. Computed here from this arm's raw records, so a figure quoted from another tool can be
matched to the right row (milliseconds)."""),
    new_code_cell('''sweep_step.peer_definitions_table(session)'''),
    new_markdown_cell("## Per-request view"),
    new_code_cell('''from stackbook.analysis import plots
requests = sweep_step.arm_requests(session)
m = requests[requests["phase"] == "measure"].copy()
m["arm"], m["label"] = session.arm.name, sweep["label"]
plots.ttft_distribution({session.arm.name: requests})
plots.length_histograms(m);'''),
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
from stackbook.analysis import comparison as analysis
from stackbook.analysis import plots
from stackbook.locations import REPO_ROOT
import os
os.chdir(REPO_ROOT)
run = Path(run_dir)
campaign, arms = analysis.load_run(run)
figures = run / "figures"
display(Markdown(f"**Campaign** `{campaign.name}`: {campaign.description}  \\n**Arms:** " +
                 ", ".join(f"`{n}` ({a['arm'].engine.kind})" for n, a in arms.items())))
remote = analysis.remote_arms(arms)
if remote:
    display(Markdown(f"**Remote endpoints:** {', '.join(remote)}: their latencies include the network path."))
display(Markdown("Evidence per arm: " + "; ".join(
    f"`{n}`: [sizing](arms/{n}/10_sizing.ipynb), [canaries](arms/{n}/20_canaries.ipynb), "
    f"[sweep](arms/{n}/30_load_sweep.ipynb), [raw requests](arms/{n}/requests.jsonl), "
    f"[engine log](arms/{n}/engine.log), [passport](arms/{n}/passport.md)" for n in arms)))'''),
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
    new_markdown_cell("""## Do the arms compute the same thing?

The greedy outputs of the canary prompts, side by side. With identical weights, precision and
decoding, engines usually agree token for token on short answers; where they diverge, the text
shows how (numerics, template or sampling differences)."""),
    new_code_cell('''agreement = analysis.canary_agreement(arms)
agreement if not agreement.empty else Markdown("*Fewer than two arms ran the canaries.*")'''),
    new_markdown_cell("""## Side by side

Every figure below is computed from the arms' `requests.jsonl` (linked above); the per-arm sweep
notebooks show the same points one arm at a time. Figures are saved under `figures/`."""),
    new_code_cell('''df = analysis.comparison_frame(arms)
analysis.headline(df)'''),
    new_markdown_cell("## Discarded points\n\nThe campaign's preregistered discard rules, applied mechanically; the raw records of a discarded point stay on disk."),
    new_code_cell('''d = analysis.discards_frame(arms)
d if not d.empty else Markdown("*No point was discarded.*")'''),
    new_markdown_cell("## Verdict"),
    new_code_cell('''display(Markdown("\\n".join(f"* {line}" for line in analysis.verdict(df, fair, campaign.protocol.slo))))'''),
    new_markdown_cell("## Figures\n\nSaved under `figures/` beside this notebook."),
    new_code_cell('''plots.latency_vs_load(df, figures, "e2e_ms");'''),
    new_code_cell('''plots.latency_vs_load(df, figures, "ttft_ms");'''),
    new_code_cell('''plots.throughput_vs_concurrency(df, figures);'''),
    new_markdown_cell("""## Throughput against tail latency

Each point is one arm at one load. The frontier keeps the points no other point beats on both
axes at once; everything else is dominated. An arm that reaches the highest throughput only by
pushing p99 far out sits at the right of the frontier: fine for batch work, wrong for a chat
product."""),
    new_code_cell('''plots.pareto(df, figures)
analysis.pareto_frontier(df) if not df.empty else None'''),
    new_markdown_cell("""## Inside the SLO

The highest load each arm sustained with at least 99% of requests inside every SLO bound
(TTFT and TPOT), and the goodput there: the capacity that counts for the product."""),
    new_code_cell('''analysis.slo_capacity(df) if not df.empty else None'''),
    new_markdown_cell("""## How close to the hardware's bound

Single-stream decode (concurrency 1) against the memory-bandwidth bound from the sizing notebook:
each token must read all the weights once. A low share points at overheads above the kernels
(host, runtime); a share near 100% says the hardware itself is the limit."""),
    new_code_cell('''analysis.roofline_efficiency(arms, df) if not df.empty else None'''),
    new_markdown_cell("""## A queueing model of each arm, checked against held-out loads

A closed-loop benchmark is a closed queueing network: N clients, each waiting for its reply. We
fit a two-center model per arm, using only the lightest and the heaviest load: a queueing center
whose demand is the inverse of the saturation throughput (the bottleneck), and a delay center for
the rest of the light-load response (work that overlaps across requests, as batched decoding
does). Exact Mean Value Analysis then predicts every load in between; the error on the loads held
out of the fit says how far the model can be trusted for untested loads."""),
    new_code_cell('''curves, errors = analysis.queueing_fits(df) if not df.empty else (pd.DataFrame(), pd.DataFrame())
plots.predicted_vs_measured(curves, figures)
errors.round(2) if not errors.empty else Markdown("*Fewer than three loads per arm: nothing held out.*")'''),
    new_code_cell('''plots.ttft_distribution({n: a["requests"] for n, a in arms.items() if not a["requests"].empty}, figures);'''),
    new_markdown_cell("## Passports\n\nThe four parts per arm, as written to `arms/<arm>/passport.md`. Raw evidence: `arms/<arm>/requests.jsonl` (every request, every chunk time) and `arms/<arm>/engine.log`."),
    new_code_cell('''for n, a in arms.items():
    md = a["dir"] / "passport.md"
    display(Markdown(md.read_text() if md.exists() else f"*{n}: no passport (the arm did not run)*"))'''),
])

decide = nb([
    new_markdown_cell("""# 00 · Decide: three questions before any benchmark

"Which stack is fastest?" has no answer on its own: speed belongs to a stack *paired with* a
model, a machine and a traffic pattern. What does have an answer is a short procedure. Ask, in
this order:

1. **Hardware.** Can memory hold the weights plus the cache the context needs? This is the one
   question that can end the discussion: if it does not fit, no engine choice rescues it.
2. **Workload shape.** One person at a keyboard or hundreds of sessions? Long prefixes shared by
   every request? Output that must be valid JSON? Long contexts, long generations? Each answer
   pushes toward a different engine, and they can pull in different directions.
3. **Ops capacity.** Who upgrades drivers, watches p99, is awake when a kernel regression lands?
   A stack that is ten percent faster and costs a quarter of an engineer is not ten percent
   better, and a metered endpoint may cost less than idle silicon.

The output of this notebook is a *shortlist with reasons*, not a winner. The campaign that
follows (sizing, canaries, load sweep) measures the shortlist on your own workload.

Change the parameters below to your own situation; the defaults are the worked example of a
team of three serving 200 daily users short 8K-token chats that must come back as JSON."""),
    params('''model = "qwen3.8-27b"          # a catalog name, or a path to config.json / .gguf
context_tokens = 8192
weight_precisions = ["bf16", "fp8", "q4_k_m"]
kv_precision = "bf16"
# the team and its traffic
platform = "nvidia"               # nvidia | apple | amd | cpu | mixed
concurrent_users = 200
shared_prefix = True              # a system prompt or policy document every request repeats
json_output = True
ops_engineers = 0.5               # people who can own a serving deployment
on_call = False
volume = "steady"                 # steady | spiky | low
throughput_dominant_cost = False
# the money (illustrative figures: put your own quotes here)
tokens_per_day = 200 * 40 * 1500  # users x requests x tokens each
price_per_million_tokens = 0.60   # managed endpoint, blended input/output
card_hour_price = 2.50            # one 80 GB card, on demand
ops_hours_per_day = 2.0
engineer_hour_price = 90.0'''),
    new_code_cell('''from IPython.display import Markdown, display
import pandas as pd
from stackbook.analysis import decide
from stackbook import sizing
from stackbook.model.geometry import geometry_for, model_catalog

g = geometry_for(model)
artifacts = model_catalog().get(model, {}).get("artifacts", {})
display(Markdown(f"**{g.name}**: {g.num_parameters / 1e9:.1f} B parameters, {g.num_layers} layers "
                 f"({g.kv_layers} keep a KV cache, {g.linear_layers} linear-attention with a fixed state), "
                 f"trained context {g.max_context:,} tokens."))'''),
    new_markdown_cell("""## 1 · Hardware: what fits, and how many sequences live at once

For every accelerator in the catalog and each weight precision: the weights, what is left for the
cache after a default workspace and activation allowance, the whole sequences of `context_tokens`
that fit in it (KV for the layers that keep it, plus recurrent state), and the bandwidth bound on
single-stream decode. A row with no live sequence is a machine to cross off."""),
    new_code_cell('''hw = pd.DataFrame(decide.hardware_table(g, context_tokens, weight_precisions, artifacts, kv_precision))
hw.pivot_table(index="accelerator", columns="weights", values="live sequences", sort=False)'''),
    new_code_cell('''hw[hw["fits"]].sort_values("decode bound tok/s", ascending=False).head(12).reset_index(drop=True)'''),
    new_markdown_cell("""Is that enough for the traffic? Concurrent *sessions* are not concurrent *requests*: 200
daily users spread over a working day rarely have more than a handful of requests in flight at
once. Compare the live-sequence count with the peak number of requests in flight you expect
(requests per second × seconds per request), not with the number of users."""),
    new_markdown_cell("""## 2 · Workload shape and 3 · ops capacity: the shortlist

Each candidate carries the reason it is on the list. Several can be on it at once: that is what
the measurement is for."""),
    new_code_cell('''answers = decide.Answers(platform=platform, concurrent_users=concurrent_users, shared_prefix=shared_prefix,
                         json_output=json_output, context_tokens=context_tokens, ops_engineers=ops_engineers,
                         on_call=on_call, volume=volume, throughput_dominant_cost=throughput_dominant_cost)
pd.DataFrame(decide.shortlist(answers)).set_index("stack")'''),
    new_markdown_cell("""## The managed endpoint, in numbers

A metered endpoint costs tokens per day × price. Owning costs card-hours whether or not they are
busy, plus the people who keep them running. The break-even volume is where the two meet; below
it, owning a card is buying idle silicon."""),
    new_code_cell('''cost = decide.managed_vs_owned(tokens_per_day, price_per_million_tokens, card_hour_price,
                              ops_hours_per_day=ops_hours_per_day, engineer_hour_price=engineer_hour_price)
display(Markdown(f"Managed: **{cost['managed_per_day']:,.2f} per day** for {tokens_per_day:,.0f} tokens. "
                 f"Owned: **{cost['owned_per_day']:,.2f} per day** (card and operations). "
                 f"Break-even at **{cost['break_even_tokens_per_day']:,.0f} tokens per day**; "
                 f"at this volume the cheaper option is the **{cost['cheaper']}**."))
volumes = [tokens_per_day * f for f in (0.1, 0.3, 1, 3, 10, 30, 100)]
pd.DataFrame([{"tokens per day": f"{v:,.0f}", **{k: round(x, 2) for k, x in decide.managed_vs_owned(
    v, price_per_million_tokens, card_hour_price, ops_hours_per_day=ops_hours_per_day,
    engineer_hour_price=engineer_hour_price).items() if k.endswith("per_day") and "break" not in k}}
    for v in volumes]).set_index("tokens per day")'''),
    new_markdown_cell("""## What decided it

Not a benchmark: capacity arithmetic, a feature requirement and a headcount. The next step is to
write the shortlist down as the arms of a campaign (`campaigns/*.yaml`) and confirm the choice by
measurement on your own traffic, with every arm held to the same protocol."""),
])

demand_map = nb([
    new_markdown_cell("""# 50 · Mapping the stack: where does a request's time go?

Every layer of a serving stack (the silicon, the kernels, the host, the inference runtime, the
orchestration above it) offers optimizations, and most of them are reasonable. The question is
which one moves the system. A first-order model answers it with three numbers per layer:

* **V** — how many times a request visits the layer (kernel launches, runtime passes, routing
  decisions);
* **S** — the service time of one visit;
* **m** — the parallel capacity the layer has (replicas, workers).

The **demand** is D = V × S, the work one request puts on the layer. Dividing by capacity gives
D / m, and the layer with the largest D / m is the **bottleneck**: the throughput of the whole
path cannot exceed min(m / D) requests per unit time, whatever the other layers do. Improve a
layer that is not the bottleneck and nothing moves; improve the bottleneck and the next layer in
the ranking takes its place.

The values below are illustrative, chosen so the map reproduces the worked example: scores of 8,
12, 3, 13 and 2.5 ms."""),
    params('''improved_layer = "runtime"
improvement = 0.10   # 10% faster service time'''),
    new_code_cell('''from IPython.display import Markdown, display
import numpy as np
import pandas as pd
import matplotlib.pyplot as plt
from stackbook.analysis import plots
from stackbook.analysis import demand_map, queueing

before = demand_map.demand_map(demand_map.SEED_LAYERS)
display(pd.DataFrame(before["layers"]).set_index("name"))
plots.demand_bars(before);'''),
    new_markdown_cell("## After improving one layer"),
    new_code_cell('''after = demand_map.demand_map(demand_map.improve(demand_map.SEED_LAYERS, improved_layer, improvement))
display(Markdown(f"Making **{improved_layer}** {improvement:.0%} faster: bottleneck **{before['bottleneck']}** -> "
                 f"**{after['bottleneck']}**; bound {before['throughput_bound_rps']:.1f} -> "
                 f"{after['throughput_bound_rps']:.1f} requests/s."))
plots.demand_bars(after);'''),
    new_markdown_cell("""## Why averages are not enough: variability makes queues

The bound above is about averages. Waiting time depends on variability too. For a single queue
with Poisson arrivals the Pollaczek-Khinchine formula gives the mean wait
Wq = ρS / (1 − ρ) × (1 + Cs²) / 2, where ρ is utilization and Cs the coefficient of variation of
service times. Kingman's approximation extends it to any arrival process by replacing the 1 with
Ca², the arrival variability. Both blow up as ρ approaches 1, and both grow with variance: a change
that lowers the mean service time but raises its variance can make the tail worse."""),
    new_code_cell('''rho = np.linspace(0.05, 0.95, 50)
fig, ax = plt.subplots(figsize=(6.5, 4))
for ca, cs in ((1, 0), (1, 1), (2, 1), (1, 2)):
    ax.plot(rho, [queueing.kingman_wait(r, 1.0, ca, cs) for r in rho], label=f"Ca={ca}, Cs={cs}")
ax.set_xlabel("utilization rho"); ax.set_ylabel("mean wait / mean service time")
ax.set_yscale("log"); ax.grid(alpha=0.3); ax.legend(); ax.set_title("Kingman's approximation (Ca=1: Pollaczek-Khinchine)");'''),
    new_markdown_cell("""## Closed loops: Mean Value Analysis

A benchmark with N clients that each wait for a reply is a *closed* network: the arrival rate
is not set from outside but falls as responses slow down. Mean Value Analysis computes its exact
throughput and response time for each N from the demands alone. Throughput rises until the
bottleneck saturates at 1 / D_max; after that, every added client only adds waiting."""),
    new_code_cell('''demands_s = [row["adjusted_ms"] / 1000 for row in before["layers"]]
curve = pd.DataFrame(queueing.mva(demands_s, 32))
fig, ax = plt.subplots(figsize=(6.5, 4))
ax.plot(curve["n"], curve["throughput"], "-o", ms=3, label="throughput (req/s)")
ax.axhline(before["throughput_bound_rps"], ls="--", color="gray", label="bound 1/D_max")
ax.set_xlabel("clients N"); ax.set_ylabel("requests / s"); ax.grid(alpha=0.3); ax.legend();
curve[["n", "throughput", "response"]].iloc[[0, 1, 3, 7, 15, 31]].round(4).set_index("n")'''),
    new_markdown_cell("""## From the map to a measurement

The map ranks hypotheses; it does not replace the whole-system benchmark. Choose the smallest
experiment that can confirm or refute the current bottleneck, change one thing, and rerun the
campaign with everything else held fixed. The analysis notebook (40) fits the same closed-network
model to each arm's measured sweep and reports how well it predicts loads it was not fitted on."""),
])

for name, book in [("00_decide", decide), ("10_sizing", sizing), ("20_canaries", canaries), ("30_load_sweep", sweep),
                   ("40_analysis", analysis), ("50_demand_map", demand_map)]:
    nbformat.write(book, OUT / f"{name}.ipynb")
    print("wrote", OUT / f"{name}.ipynb")
