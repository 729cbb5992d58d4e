# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     notebook_metadata_filter: -jupytext.text_representation
#   kernelspec:
#     display_name: Python (stackbook)
#     language: python
#     name: stackbook
# ---

# %% [markdown]
# # 30 · Load sweep: latency and throughput as load grows
#
# Load arrives as the protocol says: a closed loop of N clients (each sends its next request the
# moment its previous reply ends), or an open loop that sends on a schedule (constant, Poisson,
# gamma or a replayed trace) whatever the replies are doing. Every request streams; the client
# stamps the arrival of each chunk's bytes, so every figure below can be recomputed under another
# definition. Warm-up and cool-down requests run at the same load and are recorded, but excluded.
#
# Names used: **TTFT** (first content chunk after sending), **TPOT** ((E2E − TTFT) / (N − 1), N from
# the server's usage), **chunk ITL** (gap between chunks), **E2E** (sent to last byte), **normalized
# E2E** (E2E / N). **Goodput** counts only requests that met every SLO bound, and failed requests
# stay in its denominator. Raw records are appended to `requests.jsonl` as each request completes,
# so an interruption loses nothing measured.

# %% tags=["parameters"]
# Parameters (papermill overrides these). With endpoint = None the notebook starts the arm's
# engine itself, so it also runs on its own in JupyterLab.
campaign_file = "campaigns/quickstart.yaml"
run_dir = None     # None: a scratch run under outputs/<campaign>/interactive-<time>
arm = None         # None: the campaign's first arm
endpoint = None    # e.g. "http://127.0.0.1:8080" when the runner has started the engine
start_engine = True  # False: arithmetic only (a campaign sized for hardware that is not here)
run_id = None
repetitions = None  # the repetitions to run now, e.g. [1] (None: the protocol's minimum, all in this kernel)
began = None       # how they began, e.g. "fresh engine start" (the runner says)

# %%
from IPython.display import Markdown, display
import pandas as pd
from stackbook.analysis import plots
from stackbook.analysis.tables import readable
from stackbook.measure.sweep import load_levels
from stackbook.steps.session import open_arm
from stackbook.steps import sweep as sweep_step

session = open_arm(campaign_file, run_dir=run_dir, arm=arm, endpoint=endpoint, start_engine=start_engine)
display(Markdown(session.describe()))

# %% [markdown]
# ## The workload
#
# What every request of this arm looked like, and what the prefix cache held when each point
# began. The cache state is part of the protocol: a cache left warm by the previous point can make
# a later point look several times faster than it is.

# %%
sweep_step.workload_table(session)

# %%
sweep = sweep_step.arm_sweep(session, run_id=run_id, progress=endpoint is None, repetitions=repetitions,
                             began=began)
display(Markdown(sweep_step.sweep_summary(sweep)))
readable(sweep_step.points_table(sweep))

# %% [markdown]
# Latency and throughput against load (saved under `arms/<arm>/figures/`): first per load over
# the repetitions, with the interval the campaign's verdict uses, then every point apart, where a
# black marker shows a point that is not ranked (the arm on HOLD, or the point discarded), the
# reason in the legend.

# %%
points = sweep_step.points_frame(session, sweep)
per_load, confidence = sweep_step.load_figures_table(session, points)
from stackbook.analysis import interval_plots

interval_plots.figure_vs_load(per_load, "output_throughput", confidence, session.arm_dir.figures)

# %%
interval_plots.figure_vs_load(per_load, "ttft_p50", confidence, session.arm_dir.figures)

# %% [markdown]
# Every repetition's points apart:

# %%
plots.latency_vs_load(points, session.arm_dir.figures, "ttft_ms")

# %%
plots.latency_vs_load(points, session.arm_dir.figures, "e2e_ms")

# %%
plots.latency_vs_load(points, session.arm_dir.figures, "tpot_ms")

# %%
plots.throughput_vs_concurrency(points, session.arm_dir.figures)

# %% [markdown]
# ## Capacity inside the SLO
#
# Where the protocol asks for it (`protocol.capacity`), each repetition searches the highest
# concurrency this engine carries inside the SLO: double from the start until a probe is proven
# outside, then bisect between the highest load proven inside and the lowest proven outside. A
# probe is a closed-loop point like the sweep's (same prompts, warm-up, cool-down, cache state);
# it is inside when the share of its requests meeting every bound has a 95% lower bound at or above
# the target, outside when the upper bound is below it, and undecided otherwise, or when its load
# did not hold (then it runs again with twice the requests). The answer is an interval, never a
# single number. Probe records are kept apart, in `capacity_requests.jsonl`.

# %%
from stackbook.steps import capacity as capacity_step

capacity = capacity_step.arm_capacity(session, run_id=run_id, repetitions=repetitions, progress=endpoint is None)
if capacity is None:
    display(Markdown("No capacity search: this protocol sets no `capacity`."))
else:
    display(readable(capacity_step.rounds_table(capacity)))
    display(readable(capacity_step.probes_table(capacity)))

# %% [markdown]
# ## Was the load what the protocol asked for?
#
# For a closed loop, the measured requests alone (warm-up and cool-down left out) must keep the
# configured concurrency within 10%, both as requests in flight and by Little's law (throughput ×
# mean E2E); for an open loop, the achieved rate must match the schedule and no
# send may lag its deadline by more than 5 ms at p99. A point that fails measured the client, not
# the engine: it is marked invalid and discarded by the preregistered rule. Output length is
# checked too: each request asked for a stated number of tokens, and shorter replies are counted.
# The client's own cost comes next: how many processes sent each point (`protocol.loadgen`) and
# the busiest one's share of a CPU core. A process near a full core is the first to send late.

# %%
display(readable(pd.DataFrame(sweep["load_validity"]).T))
display(readable(sweep_step.client_table(sweep)))
display(Markdown(sweep_step.client_note(sweep)))
pd.Series(sweep["length_control"]).to_frame("value")

# %% [markdown]
# ## Prefix cache and accelerator, per point
#
# The flush (and priming, for a warm cache) done before each point, then what the cache served:
# the engine's own hit counters where it exports them, and the cached prompt tokens its replies
# reported. GPU memory, power and utilisation come from NVML when a GPU is present.

# %%
display(sweep_step.prefix_cache_table(sweep))
pd.Series(sweep["gpu_telemetry"], dtype=object).to_frame("GPU telemetry")

# %% [markdown]
# ## Replicas and router, per point
#
# An arm of several replicas behind a router: each replica's requests and share (from the
# router's own per-replica counts, or inferred from the tokens each generated where the client
# rotated itself), the prompt tokens it computed, its busy fraction (CPU seconds over its threads
# and the point's time), its prefix hits (inferred: its requests at the point's mean prompt length
# against what it computed) and the imbalance; then the router's retries, failed attempts and
# status codes, the deployment's realized hit rate beside the one the workload implies, and the
# router's added time measured idle. Every engine figure in this notebook is the replicas' counters summed.

# %%
from stackbook.routing import tables as routing_tables
display(routing_tables.replicas_table(sweep))
routing_tables.router_table(sweep)

# %% [markdown]
# ## What the engine itself counted during each point (its Prometheus `/metrics`)

# %%
readable(sweep_step.telemetry_table(sweep))

# %% [markdown]
# ## Client against the engine's own clock
#
# While each point ran, a separate process read the engine's gauges (requests running and waiting,
# KV-cache use) once a second. Where the engine keeps latency histograms, their means over the
# point sit beside the client's, over the same requests (every request the point sent: the engine
# counts them all), with a verdict: PASS when both means agree within 5%, else FAIL with the likely
# cause; "not available" where the engine exports no histograms. The client's inter-token mean counts
# each gap between tokens once, as the engine's histogram does (`itl_ms_client_mean`); the per-request
# TPOT mean stays beside it. The client's TTFT also holds the engine front end's parsing and
# tokenization, so a TTFT gap there is that time, named as such.

# %%
sweep_step.engine_truth_table(sweep)

# %% [markdown]
# ## What each point cost the host, and the engine's own account
#
# CPU seconds read at each point's start and end for the client and for every process of the
# engine (by role), the engine's page faults and context switches, its own mean time per request
# in each phase (queue, prefill, decode) where it reports them, the batch it ran, the prefill and
# decode work, and the accepted length under speculative decoding. These are the inputs of the
# measured demand map (notebooks 40 and 50). Engine start-up is kept apart:
# `engine_lifecycle` below.

# %%
display(readable(sweep_step.runtime_table(sweep)))
pd.Series(sweep.get("engine_lifecycle", {}), dtype=object).to_frame("engine lifecycle")

# %% [markdown]
# ## The same requests under other tools' definitions
#
# The same label means different numbers in different tools: vLLM's ITL is a gap between stream
# events, GuideLLM's and AIPerf's ITL is a per-request average, and GuideLLM's TPOT counts the
# first token. Computed here from this arm's raw records, so a figure quoted from another tool can
# be matched to the right row (milliseconds).

# %%
sweep_step.peer_definitions_table(session)

# %% [markdown]
# ## Per-request view
#
# The TTFT, TPOT and ITL distributions of each point (n in the legend, the SLO bound dotted), the
# prompt and output lengths the engine reported, and per-request statistics at each load level
# (repetitions pooled), from the lightest load to the heaviest.

# %%
requests = sweep_step.arm_requests(session)
plots.ttft_distribution({session.arm.name: requests}, session.arm_dir.figures, session.protocol.slo)

# %%
plots.tpot_itl_distribution({session.arm.name: requests}, session.arm_dir.figures, session.protocol.slo)

# %%
plots.length_histograms(requests[requests["phase"] == "measure"], session.arm_dir.figures)

# %%
sweep_step.request_stats_by_load(requests, load_levels(session.protocol))

# %% [markdown]
# ## Over time
#
# Every request as one line, in send order: thin from send to first token, thick from first token
# to last byte, coloured by phase (warm-up and cool-down run at the same load but are not
# measured). Then the output tokens streamed per second, and the engine's CPU (cores busy) and
# resident memory (its whole process group) from the samples taken beside the load. The points'
# spans are shaded.

# %%
from stackbook.loadgen.records import read_records
from stackbook.report_page import Absent

records = read_records(session.arm_dir.requests, latest_attempt=True)
plots.request_timeline(records, session.arm_dir.figures, session.arm.name)

# %%
plots.throughput_over_time(records, session.arm_dir.figures, session.arm.name)

# %%
(plots.engine_resources_over_time(session.arm_dir.engine_samples, records, session.arm_dir.figures, session.arm.name)
 or Absent("no engine samples over time: the engine is a remote endpoint, or the run predates them "
           "(only its peak RSS was kept then)"))

# %% [markdown]
# ## The passport
#
# Identity, protocol, validity and results for this arm, written to `passport.json` and
# `passport.md`.

# %%
display(Markdown(session.arm_dir.passport_md.read_text()))
