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
#    every request? A context of two thousand tokens or two hundred thousand? Output that must be
#    valid JSON? Images? Thinking mode, so generations are long? Each answer pushes toward a
#    different engine, and the answers can pull in different directions.
# 3. **Ops capacity.** Who upgrades drivers, watches p99, is awake when a kernel regression lands?
#    A stack that is ten percent faster and costs a quarter of an engineer is not ten percent
#    better, and a metered endpoint may cost less than idle silicon.
#
# This notebook ends with a *shortlist with reasons*, not a winner. The campaign that follows
# (sizing, canaries, load sweep) measures the shortlist on your own workload.
#
# Set the parameters below to your own situation; the defaults are the seed's worked example: a
# team of three engineers serving 200 daily users short 8K-token chats that must come back as
# validated JSON, with one 80 GB accelerator funded.

# %% tags=["parameters"]
model = "qwen3.8-27b"          # a catalog name, or a path to config.json / .gguf
context_tokens = 8192             # prompt plus output per sequence; long contexts change the engines' notes
weight_precisions = ["bf16", "fp8", "q4_k_m"]   # tried widest first when the model does not fit
kv_precision = "bf16"
# the hardware you have
accelerator = "a100-80gb"         # a catalog key: what the fit plan sizes first
gpus = 1                          # cards of it one deployment may use; > 1: parallelism matters
# the users, for Little's law
daily_users = 200
sessions_per_user = 1.0           # sessions per user per day
session_minutes = 10.0            # how long a session stays open
requests_per_session = 10
think_time_s = 50.0               # the user's pause between a reply and the next request
working_hours = 8.0               # the day the sessions spread over
peak_to_average = 3.0             # the busiest moment against the day's mean
concurrent_users = None           # None: the peak sessions Little's law gives; 1: one person at a keyboard
# the workload's shape
platform = "nvidia"               # nvidia | apple | amd | cpu | mixed
shared_prefix = True              # a system prompt or policy document every request repeats
json_output = True
images = False
thinking = False                  # thinking mode on: long generations
# the team
ops_engineers = 0.5               # people who can own a serving deployment
on_call = False
volume = "steady"                 # steady | spiky | low
throughput_dominant_cost = False
# the money (illustrative figures: put your own quotes here)
tokens_per_request = 1500         # prompt and reply together
tokens_per_day = None             # None: daily users x sessions x requests x tokens per request
price_per_million_tokens = 0.60   # managed endpoint, blended input/output
card_hour_price = 2.50            # one card of `accelerator`, on demand
ops_hours_per_day = 2.0
engineer_hour_price = 90.0

# %%
import math

import pandas as pd
from IPython.display import Markdown, display
from stackbook import sizing
from stackbook.analysis import decide
from stackbook.model.geometry import geometry_for, model_catalog

g = geometry_for(model)
artifacts = model_catalog().get(model, {}).get("artifacts", {})
display(Markdown(decide.describe_model(g)))

# %% [markdown]
# ## Before the questions: how many requests are in flight at the peak
#
# Daily users are not concurrent requests. Little's law (items in a system = arrival rate × time
# each spends there) turns the day's sessions into sessions open at once, and each session's
# requests into requests in flight: a session alternates a reply and the user's think time, so
# only part of it holds a sequence in the engine. The peak-to-average factor stands for the
# busiest moment of the day.

# %%
demand = decide.peak_demand(daily_users, session_minutes, requests_per_session, think_time_s,
                            working_hours=working_hours, peak_to_average=peak_to_average,
                            sessions_per_user=sessions_per_user)
users = concurrent_users or demand.peak_sessions
needed = math.ceil(demand.peak_in_flight)
pd.DataFrame(decide.demand_table(demand)).set_index("quantity")

# %% [markdown]
# ## 1 · Hardware: what fits, in the seed's order
#
# Start from the cards you have. Try the widest weight precision first and quantize only as far as
# it takes to hold the peak's sequences; if no precision fits, add cards of the same kind (sharded
# with tensor parallelism); only when neither works is a smaller model the answer.

# %%
plan = decide.fit_plan(g, accelerator, gpus, context_tokens, weight_precisions, artifacts, kv_precision,
                       needed_sequences=needed)
display(Markdown(plan.verdict))
pd.DataFrame(decide.fit_plan_rows(plan)).set_index("order")

# %%
live = plan.chosen.live_sequences if plan.chosen else 0
display(Markdown(decide.demand_sentence(demand, live, context_tokens)))

# %% [markdown]
# The other options, for comparison: every device of the catalog, one card and sharded across
# 2, 4 and 8 where the device allows it, with a 32 GB Mac and a 32 GB laptop among them. Each
# cell is the number of sequences of `context_tokens` that live at once (0: it does not fit). On a
# Mac or a laptop the operating system keeps part of the memory: validate the headroom there.

# %%
hw = pd.DataFrame(decide.hardware_table(g, context_tokens, weight_precisions, artifacts, kv_precision))
hw.pivot_table(index=["accelerator", "cards"], columns="weights", values="live sequences", sort=False).astype(int)

# %%
hw[hw["fits"] & (hw["cards"] == gpus)].sort_values("decode bound tok/s", ascending=False).head(12).reset_index(
    drop=True)

# %% [markdown]
# ### The memory wall
#
# Silicon changes the bound by moving memory closer to compute, and trades capacity for bandwidth
# as it does. The seed's examples, with the devices each would need just to hold this model's
# widest weights (a floor: no cache, no buffers):

# %%
widest = max(sizing.weight_bytes(g.num_parameters, p, artifacts.get(p, {}).get("bytes"))
             for p in weight_precisions)
pd.DataFrame(decide.silicon_table(widest)).set_index("device")

# %% [markdown]
# ## 2 · Workload shape and 3 · ops capacity: the shortlist
#
# First what each answer changes whichever stack is chosen; then the candidates, each with the
# reason it is on the list and what every answer asks of it: the feature the engine offers for
# it, or the check the campaign must make. Several stacks can be on
# the list at once: that is what the measurement is for. A managed endpoint joins the list when
# volume is low or spiky *and* nobody is there to run a stack, or when this notebook's own
# arithmetic says so: the endpoint is cheaper at the stated volume and the owned capacity would
# stand mostly idle (the numbers are in the last section).

# %%
tokens_per_day = tokens_per_day or (daily_users * sessions_per_user * requests_per_session * tokens_per_request)
owned = {"cards": plan.chosen.cards if plan.chosen else gpus, "ops_hours_per_day": ops_hours_per_day,
         "engineer_hour_price": engineer_hour_price}
cost = decide.managed_vs_owned(tokens_per_day, price_per_million_tokens, card_hour_price, **owned)
arithmetic = decide.Arithmetic(tokens_per_day, cost["managed_per_day"], cost["owned_per_day"],
                               demand.mean_in_flight, live)
answers = decide.Answers(platform=platform, gpus=gpus, concurrent_users=users, shared_prefix=shared_prefix,
                         json_output=json_output, context_tokens=context_tokens, images=images, thinking=thinking,
                         ops_engineers=ops_engineers, on_call=on_call, volume=volume,
                         throughput_dominant_cost=throughput_dominant_cost)
display(Markdown(f"Concurrent users read as **{users}**" + ("" if concurrent_users else
                 " (the peak sessions from Little's law)") + "."))
with pd.option_context("display.max_colwidth", None):
    display(pd.DataFrame(decide.what_each_answer_changes(answers, arithmetic)).set_index("answer"))
    display(pd.DataFrame(decide.shortlist(answers, arithmetic)).set_index("stack"))

# %% [markdown]
# ## The managed endpoint, in numbers
#
# A metered endpoint costs tokens per day × price. Owning costs card-hours for every card whether
# or not they are busy, plus the people who keep them running. The break-even volume is where the
# two meet; below it, owning is buying idle silicon. The table repeats the arithmetic from a tenth
# of this volume to a hundred times it.

# %%
display(Markdown(decide.cost_summary(cost, tokens_per_day)))
volumes = [tokens_per_day * f for f in (0.1, 0.3, 1, 3, 10, 30, 100)]
pd.DataFrame(decide.cost_by_volume(volumes, price_per_million_tokens, card_hour_price, **owned)).set_index(
    "tokens per day")

# %% [markdown]
# ## What decided it
#
# Not a benchmark: capacity arithmetic, a feature requirement and a headcount. The next step is
# to write the shortlist down as the arms of a campaign (`campaigns/*.yaml`) and confirm the
# choice by measurement on your own traffic, with every arm held to the same protocol.
