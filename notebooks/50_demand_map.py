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
# which one moves the system. A first-order model answers it with three numbers per layer:
#
# * **V** — how many times a request visits the layer (kernel launches, runtime passes, routing
#   decisions);
# * **S** — the service time of one visit;
# * **m** — the parallel capacity the layer has (replicas, workers).
#
# The **demand** D = V × S is the work one request puts on the layer. Divided by capacity it gives
# D / m, and the layer with the largest D / m is the **bottleneck**: the whole path cannot carry
# more than min(m / D) requests per unit time, whatever the other layers do. Improve a layer that
# is not the bottleneck and nothing moves; improve the bottleneck and the next layer in the ranking
# takes its place.
#
# The values below are illustrative, chosen so the map reproduces the worked example's scores of
# 8, 12, 3, 13 and 2.5 ms.

# %% tags=["parameters"]
improved_layer = "runtime"
improvement = 0.10   # 10% faster service time

# %%
from IPython.display import Markdown, display
import pandas as pd
from stackbook.analysis import plots
from stackbook.analysis import demand_map, queueing
from stackbook.analysis.tables import readable

before = demand_map.demand_map(demand_map.SEED_LAYERS)
display(readable(pd.DataFrame(before["layers"]).set_index("name")))
plots.demand_bars(before)

# %% [markdown]
# ## After improving one layer

# %%
after = demand_map.demand_map(demand_map.improve(demand_map.SEED_LAYERS, improved_layer, improvement))
display(Markdown(demand_map.improvement_summary(before, after, improved_layer, improvement)))
plots.demand_bars(after)

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
# ## Closed loops: Mean Value Analysis
#
# A benchmark with N clients that each wait for a reply is a *closed* network: the arrival rate is
# not set from outside but falls as responses slow down. Mean Value Analysis computes its exact
# throughput and response time for each N from the demands alone. Throughput rises until the
# bottleneck saturates at 1 / D_max; after that, every added client only adds waiting.

# %%
demands_s = [row["adjusted_ms"] / 1000 for row in before["layers"]]
curve = pd.DataFrame(queueing.mva(demands_s, 32))
display(plots.mva_throughput(curve, before["throughput_bound_rps"]))
readable(curve[["n", "throughput", "response"]].iloc[[0, 1, 3, 7, 15, 31]].set_index("n")
         .rename(columns={"throughput": "throughput (req/s)", "response": "response time (s)"}))

# %% [markdown]
# ## From the map to a measurement
#
# The map ranks hypotheses; it does not replace the whole-system benchmark. Choose the smallest
# experiment that can confirm or refute the current bottleneck, change one thing, and rerun the
# campaign with everything else held fixed. The analysis notebook (40) fits the same
# closed-network model to each arm's measured sweep and reports how well it predicts loads it was
# not fitted on.
