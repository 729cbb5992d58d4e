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
# # 20 · Canaries: is the output right before anything is timed
#
# A fast stack that answers wrongly is not a candidate. Each check runs at temperature 0 and has a
# machine-checkable answer: text that must appear, a pattern, JSON that must validate against a
# schema, or the same greedy reply repeated sequentially and under concurrency. The suite is data
# (a versioned YAML file whose hash goes into the passport).
#
# The verdict is **PASS** when every gating check passes, else **HOLD**: a held arm's timings are
# never ranked. The gating set is the campaign's, the same for every arm; a capability the
# campaign's workload does not use may be declared out of scope for the whole campaign
# (`protocol.canaries.out_of_scope`, with its reason): those checks still run and are shown here.

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
from stackbook.steps import canaries as canaries_step

session = open_arm(campaign_file, run_dir=run_dir, arm=arm, endpoint=endpoint, start_engine=start_engine)
display(Markdown(session.describe()))

# %%
result, table = canaries_step.arm_canaries(session, progress=endpoint is None)
table

# %%
display(Markdown(canaries_step.verdict_summary(result)))
pd.DataFrame(result["counts"])  # every check, failures by cause: gating and out of scope apart

# %% [markdown]
# ## What this endpoint can do
#
# Observed, not assumed: whether the stream reports token usage; whether the output-length
# controls are honoured (without them two arms can generate different lengths and the comparison
# is void); how many tokens arrive per stream chunk (above one, chunk gaps are not token gaps);
# whether metrics and a prefix-cache reset are available; and the context actually served.

# %%
pd.Series(result["probe"], dtype=object).to_frame("observed")
