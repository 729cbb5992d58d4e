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
# # 00 · Decide: three questions before any benchmark
#
# "Which stack is fastest?" has no answer on its own: speed belongs to a stack *paired with* a
# model, a machine and a traffic pattern. What does have an answer is a short procedure. Ask, in
# this order:
#
# 1. **Hardware.** Can memory hold the weights plus the cache the context needs? This is the one
#    question that can end the discussion: if it does not fit, no engine choice rescues it.
# 2. **Workload shape.** One person at a keyboard or hundreds of sessions? Long prefixes shared by
#    every request? Output that must be valid JSON? Long contexts, long generations? Each answer
#    pushes toward a different engine, and the answers can pull in different directions.
# 3. **Ops capacity.** Who upgrades drivers, watches p99, is awake when a kernel regression lands?
#    A stack that is ten percent faster and costs a quarter of an engineer is not ten percent
#    better, and a metered endpoint may cost less than idle silicon.
#
# This notebook ends with a *shortlist with reasons*, not a winner. The campaign that follows
# (sizing, canaries, load sweep) measures the shortlist on your own workload.
#
# Set the parameters below to your own situation; the defaults are the worked example: a team of
# three serving 200 daily users short 8K-token chats that must come back as JSON.

# %% tags=["parameters"]
model = "qwen3.8-27b"          # a catalog name, or a path to config.json / .gguf
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
engineer_hour_price = 90.0

# %%
from IPython.display import Markdown, display
import pandas as pd
from stackbook.analysis import decide
from stackbook.model.geometry import geometry_for, model_catalog

g = geometry_for(model)
artifacts = model_catalog().get(model, {}).get("artifacts", {})
display(Markdown(decide.describe_model(g)))

# %% [markdown]
# ## 1 · Hardware: what fits, and how many sequences live at once
#
# For every accelerator in the catalog and each weight precision: the weights, what is left for
# the cache after a default workspace and activation allowance, the whole sequences of
# `context_tokens` that fit in it (KV for the layers that keep it, plus recurrent state), and the
# bandwidth bound on single-stream decode. A row with no live sequence is a machine to cross off.

# %%
hw = pd.DataFrame(decide.hardware_table(g, context_tokens, weight_precisions, artifacts, kv_precision))
hw.pivot_table(index="accelerator", columns="weights", values="live sequences", sort=False)

# %%
hw[hw["fits"]].sort_values("decode bound tok/s", ascending=False).head(12).reset_index(drop=True)

# %% [markdown]
# Is that enough for the traffic? Concurrent *sessions* are not concurrent *requests*: 200 daily
# users spread over a working day rarely have more than a handful of requests in flight at once.
# Compare the live-sequence count with the peak number of requests in flight you expect (requests
# per second × seconds per request), not with the number of users.

# %% [markdown]
# ## 2 · Workload shape and 3 · ops capacity: the shortlist
#
# Each candidate carries the reason it is on the list. Several can be on it at once: that is what
# the measurement is for.

# %%
answers = decide.Answers(platform=platform, concurrent_users=concurrent_users, shared_prefix=shared_prefix,
                         json_output=json_output, context_tokens=context_tokens, ops_engineers=ops_engineers,
                         on_call=on_call, volume=volume, throughput_dominant_cost=throughput_dominant_cost)
pd.DataFrame(decide.shortlist(answers)).set_index("stack")

# %% [markdown]
# ## The managed endpoint, in numbers
#
# A metered endpoint costs tokens per day × price. Owning costs card-hours whether or not they are
# busy, plus the people who keep them running. The break-even volume is where the two meet; below
# it, owning a card is buying idle silicon. The table repeats the arithmetic from a tenth of this
# volume to a hundred times it.

# %%
people = {"ops_hours_per_day": ops_hours_per_day, "engineer_hour_price": engineer_hour_price}
cost = decide.managed_vs_owned(tokens_per_day, price_per_million_tokens, card_hour_price, **people)
display(Markdown(decide.cost_summary(cost, tokens_per_day)))
volumes = [tokens_per_day * f for f in (0.1, 0.3, 1, 3, 10, 30, 100)]
pd.DataFrame(decide.cost_by_volume(volumes, price_per_million_tokens, card_hour_price, **people)).set_index(
    "tokens per day")

# %% [markdown]
# ## What decided it
#
# Not a benchmark: capacity arithmetic, a feature requirement and a headcount. The next step is
# to write the shortlist down as the arms of a campaign (`campaigns/*.yaml`) and confirm the
# choice by measurement on your own traffic, with every arm held to the same protocol.
