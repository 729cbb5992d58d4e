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
# # 60 · Runs compared: the same campaign on another host or another engine build
#
# The same campaign run twice (or more) answers a different question from the arms of one run:
# does the verdict hold on other hardware, or after an engine upgrade? Here the host's identity and
# the engines' builds are the variables under test; everything the fairness check holds fixed
# across arms (model, precision, decoding, lengths, arrival pattern, measurement window, prefix
# cache, chat template) must also read the same in every run, or the comparison says so.

# %% tags=["parameters"]
run_dirs = ["outputs/quickstart/reference", "outputs/quickstart/avx2-host"]  # the first is the baseline
out_dir = None  # where figures/ and comparison.json go (stackbook compare sets it)

# %%
import os
from IPython.display import Markdown, display
from stackbook.analysis import cross_run, plots
from stackbook.analysis.tables import readable
from stackbook.evidence.rundir import ComparisonDir, RunDir
from stackbook.locations import REPO_ROOT
from stackbook.reports import write_comparison_json

os.chdir(REPO_ROOT)
runs = [RunDir(r) for r in run_dirs]
campaign_name, loaded = cross_run.load_runs(runs)
figures = ComparisonDir(out_dir).figures if out_dir else None
display(Markdown(cross_run.runs_summary(campaign_name, loaded, runs, out_dir)))

# %% [markdown]
# ## What differs by design: the host and the engine builds

# %%
readable(cross_run.declared_variables(loaded))

# %% [markdown]
# ## What must not differ: the protocol, arm by arm

# %%
fairness = cross_run.fairness_across_runs(loaded)
differing = fairness[~fairness["same in every run"]]
readable(differing) if not differing.empty else Markdown(
    f"All {len(fairness)} protocol fields read the same in every run (model, precision, decoding, workload, "
    "arrival, window, prefix cache, chat template, per arm).")

# %% [markdown]
# ## Side by side
#
# Each arm of each run, named `arm @ run`; a black cross marks a point that is not ranked in its
# own run (HOLD, not comparable, or discarded).

# %%
overlay = cross_run.overlay_frame(loaded)
plots.throughput_vs_concurrency(overlay, figures)

# %%
plots.latency_vs_load(overlay, figures, "ttft_ms")

# %%
plots.latency_vs_load(overlay, figures, "e2e_ms")

# %%
plots.pareto(overlay, figures)

# %% [markdown]
# ## How far each arm moved
#
# Output throughput of each run at each load, over the first run's.

# %%
readable(cross_run.throughput_ratios(overlay))

# %% [markdown]
# ## Verdict

# %%
verdict = cross_run.verdict(loaded, fairness, overlay)
if out_dir:
    write_comparison_json(ComparisonDir(out_dir), campaign_name, list(loaded), verdict)
display(Markdown("\n".join(f"* {line}" for line in verdict)))
