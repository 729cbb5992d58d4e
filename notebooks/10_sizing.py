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
# # 10 · Sizing: does it fit, and how many sequences live at once
#
# Arithmetic comes before any timing. Memory must hold the weights plus the cache the context
# demands; if it cannot, no engine choice helps. For this arm's model, precision and device:
#
# * **weights**: parameters × bits per weight, or the exact size of the artifact when known;
# * **KV bytes per token**: K and V, per KV head and head dimension, for each layer whose cache grows
#   with the context. Linear-attention (Gated DeltaNet) layers keep none; sliding-window layers stop
#   growing at their window; an MLA layer keeps one compressed latent;
# * **recurrent state per sequence** for hybrid models: a fixed charge per live sequence, whatever
#   its length, which is why short-context concurrency on hybrids is lower than a KV-only rule says;
# * the **cache pool** (given, or what is left after weights, workspace and activations) and the
#   **live sequences** it holds at the protocol's context;
# * the **engine's own accounting** of the same pool. Engines round to blocks, split caches per
#   slot and reserve state slots; when the engine ran, the figure it reported sits beside the
#   prediction, and the gap between the two is part of the evidence.

# %% tags=["parameters"]
# Parameters (papermill overrides these). With endpoint = None the notebook starts the arm's
# engine itself, so it also runs on its own in JupyterLab.
campaign_file = "campaigns/quickstart.yaml"
run_dir = None     # None: a scratch run under outputs/<campaign>/interactive-<time>
arm = None         # None: the campaign's first arm
endpoint = None    # e.g. "http://127.0.0.1:8080" when the runner has started the engine
start_engine = True  # False: arithmetic only (a campaign sized for hardware that is not here)
run_id = None

# %%
from IPython.display import Markdown, display
import pandas as pd
from stackbook.steps.session import open_arm
from stackbook.steps import sizing as sizing_step
from stackbook.analysis.tables import readable

session = open_arm(campaign_file, run_dir=run_dir, arm=arm, endpoint=endpoint, start_engine=start_engine)
display(Markdown(session.describe()))

# %% [markdown]
# ## The model's geometry
#
# From the bundled catalog of public configs, or read from the artifact the engine serves
# (GGUF metadata, or `config.json`).

# %%
s = sizing_step.arm_sizing(session)
pd.Series(s["geometry"]).to_frame("value")

# %% [markdown]
# ## The memory budget

# %%
readable(sizing_step.budget_table(s))

# %% [markdown]
# ## The weights under other precisions
#
# The exact size of a published artifact beats any bits-per-weight rule: block-quantized formats
# carry scales, and some tensors (embeddings, the output head) often stay at higher precision.

# %%
sizing_step.weights_table(session, s)

# %% [markdown]
# ## Why calculators disagree
#
# The same pool gives different answers under different assumptions about the cache and state
# precision. Each row is one common assumption; only the first matches what the reference
# implementation keeps.

# %%
pd.DataFrame(s["assumptions_table"]).set_index("assumption")

# %% [markdown]
# ## The engine's own accounting: predicted against realized
#
# *Predicted* applies this engine's allocation rule to the arithmetic above; *realized* is parsed
# from the engine's log and HTTP endpoints after it started (empty when the engine did not run
# here). A ratio far from 1 means the engine holds less, or more, than a reader of its flags would
# assume.

# %%
display(Markdown(f"Rule: *{s['predicted_capacity'].get('rule', 'n/a')}*"))
display(readable(sizing_step.capacity_table(s)))
sizing_step.engine_accounting(s)

# %% [markdown]
# ## The decode roofline
#
# Each generated token reads every weight once, plus the KV cache so far and the recurrent state
# (read and written). Memory bandwidth over those bytes bounds single-stream decode speed; the load
# sweep reports the measured rate against it. For `this-cpu`, the bandwidth is measured at run
# time.

# %%
readable(sizing_step.roofline_table(s))
