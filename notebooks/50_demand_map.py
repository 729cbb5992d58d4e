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
# # 50 · Mapping the stack: where does a request's time go?
#
# Every layer of a serving stack (the silicon, the kernels, the host, the inference runtime, the
# orchestration above it) offers optimizations, and most of them are reasonable. The question is
# which one moves the system. A first-order model answers it with three numbers per resource:
#
# * **V** — how many times a request visits it (engine steps, kernel launches, routing decisions);
# * **S** — the service time of one visit;
# * **m** — the parallel capacity it has (cores, replicas, workers).
#
# The **demand** D = V × S is the work one request puts on it. Divided by capacity it gives D / m,
# and the resource with the largest D / m is the **bottleneck**: the whole path cannot carry more
# than min(m / D) requests per unit time, whatever the others do.
#
# This notebook does it twice: first with the seed article's illustrative numbers over five
# *layers* (a teaching example), then with a run's own counters over *resource centres*.

# %% tags=["parameters"]
run_dir = "outputs/quickstart/reference"  # the run whose measured centres are mapped
improved_layer = "runtime"
improvement = 0.10   # 10% faster service time
figures_dir = None   # None: figures shown inline only; a folder: also saved there

# %%
import os
from pathlib import Path
from IPython.display import Markdown, display
from stackbook.analysis import plots
from stackbook.analysis import demand_map
from stackbook.analysis.tables import readable
from stackbook.locations import REPO_ROOT

os.chdir(REPO_ROOT)
figures = Path(figures_dir) if figures_dir else None

# %% [markdown]
# ## The teaching example (illustrative, not measured)
#
# The values below are chosen so the map reproduces the worked example's scores of 8, 12, 3, 13
# and 2.5 ms. Its rows are *layers*, which are optimization domains: hardware and kernels, for
# instance, are two views of the same accelerator's busy time. A real map must first give each
# measured interval to one resource owner; the measured map further down does.

# %%
before = demand_map.demand_map(demand_map.SEED_LAYERS)
display(readable(demand_map.layers_table(before)))
plots.demand_bars(before)

# %% [markdown]
# ### After improving one layer

# %%
after = demand_map.demand_map(demand_map.improve(demand_map.SEED_LAYERS, improved_layer, improvement))
display(Markdown(demand_map.improvement_summary(before, after, improved_layer, improvement)))
plots.demand_bars(after)

# %% [markdown]
# ## The measured map: resource centres from the run's own counters
#
# Each sweep point records the CPU seconds every process spent while it ran: the client, and each
# process of the engine (vLLM's API server and its EngineCore worker; llama-server is one
# process). Every CPU second belongs to exactly one process, so no interval is counted twice. The
# utilisation law turns busy time into demand: D = busy seconds / requests completed. The demands
# come from the highest-load valid point (a discarded point never counts); m is stated with its
# reason in each row. The bound is set beside the highest throughput the arm measured: by the
# same law their ratio is the bottleneck's utilisation, and the rest is idle time someone owns.

# %%
maps = demand_map.measured_demand_maps(run_dir)
readable(demand_map.bound_table(maps))

# %%
for arm, d in maps.items():
    display(Markdown(f"**{arm}** ({d.status}{', demands at ' + d.point if d.point else ''})"))
    display(readable(demand_map.centres_table(d)))
plots.measured_demand_bars(maps, figures)

# %% [markdown]
# ### The measured centres by the seed's layers
#
# Back to the five layers of the teaching example, now measured: each centre belongs to exactly one
# layer before demands are summed (the client and the API server to host execution, the scheduler
# to the runtime, the compute to the kernels, a router to orchestration). Silicon is not a demand
# here but the memory wall as a ratio: the single-stream decode rate over the bandwidth bound the
# sizing computed. Where an engine serves HTTP inside its compute process, its HTTP threads are read
# apart where they can be told apart (llama-server's pool, born before its model loads). Where two
# layers share one thread (llama-server's slot loop runs its kernels too), the engine's own clock
# splits them where it times its loop (building the batch and sampling against the model's decode),
# and the network keeps them one centre; where it does not, the row says its time sits in another
# row, with the engine's own batch gauge, rather than guess a split.

# %%
from stackbook.analysis import comparison

_, arms = comparison.load_run(run_dir)
readable(demand_map.layers_by_arm(maps, comparison.roofline_efficiency(arms, comparison.comparison_frame(arms))))

# %% [markdown]
# ## Mean Value Analysis on the measured centres
#
# A closed-loop benchmark is a closed network: N clients, each waiting for its reply. Exact MVA
# computes its throughput and mean response time for each N from the demands alone. The light-load
# response time that no centre owns enters as a pure delay. Under batching, demand per request is
# *load-dependent*: the engine reads its weights once per step for the whole batch, so the demand
# measured at one load is wrong at the others. The table predicts every closed-loop point twice,
# from the lightest load's demands and from the heaviest's, and shows the error at the loads held
# out of each fit: the size of that error is the size of the batching effect. An engine whose
# scheduler works beside its compute, each in its own process (vLLM), has a request hold both at
# once: they enter the model as one centre of the larger demand, not as two queues in series.

# %%
for arm, d in maps.items():
    table = demand_map.mva_check_table(d)
    display(Markdown(f"**{arm}**"), readable(table) if not table.empty else
            Markdown(f"*No check: {d.status if not d.measured else 'fewer than two closed-loop points'}.*"))
plots.mva_centres_check(maps, figures)

# %% [markdown]
# ## Choosing the next experiment
#
# One candidate per measured centre: cut its demand by 10% and ask the model what that buys end to
# end (the bound, and the mean response time at the highest load tested). Confidence comes from
# the spread of the demand over repetitions where there are several; risk and cost are yours to
# state (`risk_cost` in `measured_demand_maps`). The top row is the smallest experiment that could
# disprove the current bottleneck: run it, then rerun the whole sweep. Nothing is ranked by a model
# that misses its own point's mean E2E by more than 10% (the size of the cut it would judge), and
# each arm says so.

# %%
for arm, d in maps.items():
    table = demand_map.next_experiment_table(d)
    display(Markdown(f"**{arm}**"), readable(table) if not table.empty else
            Markdown(f"*{d.next_experiments_note or d.status}.*"))

# %% [markdown]
# ## Why averages are not enough: variability makes queues
#
# The bound above is about averages; waiting time depends on variability too. For a single queue
# with Poisson arrivals, the Pollaczek-Khinchine formula gives the mean wait
# Wq = ρS / (1 − ρ) × (1 + Cs²) / 2, where ρ is the utilization and Cs the coefficient of variation
# of service times. Kingman's approximation extends it to any arrival process by replacing the 1
# with Ca², the arrival variability. Both blow up as ρ approaches 1, and both grow with variance:
# a change that lowers the mean service time but raises its variance can make the tail worse.

# %%
plots.kingman_curves()

# %% [markdown]
# ## From the map to a measurement
#
# The map ranks hypotheses; it does not replace the whole-system benchmark. Change one thing,
# rerun the campaign with everything else held fixed, and read the new map: the bottleneck may
# have moved. The analysis notebook (40) shows the same measured map for every arm of a campaign.
