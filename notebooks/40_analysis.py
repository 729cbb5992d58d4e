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
# # 40 · Campaign analysis: which arm, under which conditions, with what evidence

# %% tags=["parameters"]
run_dir = "outputs/quickstart/reference"  # the run directory to analyse

# %%
from stackbook.analysis import summary

summary.show(run_dir)  # the question, the decision per load, each arm's label and evidence, the headline figure

# %%
import json
import os
from IPython.display import Markdown, display
import pandas as pd
from stackbook.analysis import comparison as analysis
from stackbook.analysis import plots
from stackbook.analysis.tables import readable, readable_or_absent, side_by_side
from stackbook.evidence.rundir import RunDir
from stackbook.report_page import Absent
from stackbook.locations import REPO_ROOT

os.chdir(REPO_ROOT)
run = RunDir(run_dir)
campaign, arms = analysis.load_run(run)
figures = run.figures

# %% [markdown]
# ## How to read this analysis
#
# This analysis compares the campaign's arms. Before any comparison it checks that the comparison is
# fair: the model, the weight and KV precision, the decoding settings, the input and output
# lengths, the arrival pattern and the measurement window must match across arms, and the
# prefix-cache state must be stated. An arm that differs in any of these is shown as *not
# comparable*; an arm whose canaries did not pass is shown as *HOLD*. Neither is ranked.
#
# Then the figures: latency percentiles and throughput at each load level, throughput against
# tail latency, and the TTFT distributions. A stack that wins on aggregate throughput while its
# tail latency doubles has lost for an interactive product, so the two are always shown together.

# %% [markdown]
# **Glossary.** **TTFT**: time to first token, from sending a request to its first content chunk.
# **TPOT**: time per output token after the first, (E2E − TTFT) / (N − 1), N output tokens by the
# server's count. **ITL** (chunk inter-token latency): each gap between two content chunks of one
# reply. **E2E**: end to end, from sending to the last byte. **Goodput**: requests per second that
# met every SLO bound (TTFT, TPOT, and E2E where set); failed requests stay in its denominator.
# **SLO attainment**: the fraction of measured requests inside every bound. **p50 / p99**: the
# median and the 99th percentile over a point's measured requests (warm-up and cool-down excluded).

# %% [markdown]
# ## Fairness
#
# Each column must read the same for every arm. The values are what each arm did (weights digests,
# the KV precision the engine logged, the decoding fields and prompts' digest from the bodies sent,
# realized output lengths and load, warm-up and window as sent), not the protocol they shared; a
# field not observed is not a difference. An arm departs from the protocol where the protocol fixes
# the value (a cache configured cold that served the workload's own content from cache, beyond the
# template head every request shares by construction), else from what most arms observed;
# two arms that disagree both depart. `differs` names the fields.

# %%
fair = analysis.fairness_table(campaign, arms)
readable(fair.T)

# %% [markdown]
# Where the workload's own prompts re-send prefixes (a replayed log's sessions, a block-hashed
# trace), the reuse an infinite prefix cache would find on them, beside what each engine realized:
# its hit counters and the cached tokens its replies reported. Nothing shows for other workloads.

# %%
from stackbook.analysis.prefix_reuse import reuse_table

reuse = reuse_table(arms)
if reuse is not None:
    display(readable(reuse))

# %% [markdown]
# An agent trace's subagents read their parent's context: the same reuse at each session depth
# (0: the sessions the trace starts, 1: the subagents they spawn), implied beside what the replies
# at that depth reported as cached. Nothing shows for a trace without subagents.

# %%
from stackbook.analysis.prefix_reuse import depth_table

depths = depth_table(arms)
if depths is not None:
    display(readable(depths))

# %% [markdown]
# A replayed trace is only evidence if it was replayed as recorded: each session's steps in order,
# each sent after the reply it acts on, and the input lengths the engine counted drawn from the
# trace's own distribution (a two-sample Kolmogorov-Smirnov test; p above 0.05 finds no
# difference). Nothing shows for workloads that replay no trace.

# %%
from stackbook.analysis.replay_fidelity import replay_table

replay = replay_table(arms)
if replay is not None:
    display(readable(replay))

# %% [markdown]
# ## Sizing across arms
#
# The same model and pool under each arm's engine: the arithmetic's live sequences, the engine's
# allocation rule applied to the same numbers, and (when the engine ran) what it reported.

# %%
sizing = analysis.sizing_frame(arms)
display(readable(sizing))
plots.sizing_bars(sizing, figures)

# %% [markdown]
# ## Correctness gate and capacity
#
# Canary verdicts, and the KV capacity each engine actually allocated beside the arithmetic.

# %%
readable(analysis.gate_table(arms))

# %% [markdown]
# ## Do the arms compute the same thing?
#
# The greedy outputs of the canary prompts, side by side. With identical weights, precision and
# decoding, engines usually agree token for token on short answers; where they diverge, the text
# shows how (numerics, template or sampling differences).

# %%
agreement = analysis.canary_agreement(arms)
agreement if not agreement.empty else Markdown("*Fewer than two arms ran the canaries.*")

# %% [markdown]
# ## Side by side, with intervals
#
# One row per arm and load, over its repetitions: each figure is the mean of the repetitions'
# estimates with its interval (Student's t over the repetitions, so it carries the run-to-run
# noise of this machine, not only the spread of requests inside one run). A percentile is shown
# only where every repetition has the requests it needs (p50: 2, p95: 20, p99: 100); below that it
# reads "max of n", the largest of n requests, and is never compared. Every figure is computed
# from the arms' `requests.jsonl` (linked above); the per-arm sweep notebooks show the same points
# one arm at a time. Figures are saved under `figures/`.

# %%
from stackbook.analysis import verdict as decide

df = analysis.comparison_frame(arms, fair)  # each point's status: accepted (ranked), or why not (discard rule, label)
confidence = decide.verdict_confidence(campaign.protocol)
table = decide.load_table(df, confidence) if not df.empty else pd.DataFrame()
readable(decide.display_table(table, confidence)) if not table.empty else Markdown("*No arm produced measurements.*")

# %% [markdown]
# Each repetition's points apart (a point is one load in one repetition), as the sweeps measured
# them; a tail percentile below its sample reads "max of n".

# %%
from stackbook.analysis.decision import sized_percentiles

display(*side_by_side(sized_percentiles(analysis.headline(df), rename=False)))

# %% [markdown]
# ## Discarded points
#
# The campaign's preregistered discard rules, applied mechanically; the raw records of a
# discarded point stay on disk.

# %%
d = analysis.discards_frame(arms)
readable(d) if not d.empty else Markdown("*No point was discarded.*")

# %% [markdown]
# ## Verdict
#
# The decision rule was fixed before the run (`protocol.decision`): at each load, each pair of
# ranked arms is compared figure by figure through the ratio of their repetition estimates and
# its interval: paired by round where both arms ran the same rounds, else Welch's on the log scale,
# the run-to-run spread pooled over the loads that share it (a load whose spread the others do not
# support is set apart; each decision row says which, with its degrees of freedom, and shows the
# interval from that load alone beside it). A difference is stated only when the whole interval
# lies beyond the `min_effect` margin; when the whole interval lies inside it the arms are "no
# different"; anything else is undecided and asks for more repetitions. With sequential stopping
# the interval's level is raised for the number of looks, so the error rate over all looks stays
# at the stated one.

# %%
result = analysis.write_analysis(run)  # analysis.json beside this notebook: labels, fairness, points, decisions
display(Markdown(decide.rule_text(result.decision_rule, campaign.protocol)))
display(Markdown("\n".join(f"* {line}" for line in result.verdict)))
readable(decide.decisions_table(result.decisions)) if result.decisions else None

# %% [markdown]
# ## The tail, from the requests themselves
#
# The verdict compares a percentile only where every repetition can estimate it (a p99 needs 100
# requests each). Here each arm's requests at a load are pooled over its ranked repetitions, and
# each tail quantile gets its order-statistic interval: exact for any distribution, and "unbounded"
# on a side the requests cannot bound, with the count that would. Two tails are ordered only where
# their intervals part. Pooling assumes the rounds draw from one distribution; the spread between
# rounds is the verdict's business, not these intervals'.

# %%
display(Markdown("\n".join(f"* {line}" for line in result.tail_verdict) or "*No ranked points to compare.*"))
readable_or_absent(pd.DataFrame(result.tails), "no ranked point has answered requests to pool")

# %% [markdown]
# ## Replicas behind a router
#
# For arms that run several replicas behind a router: each replica's share of the requests and the
# imbalance (busiest over the mean), the prefix hits the replies realized beside those one cache in
# front of every replica would reach, and the router's CPU per request. Between a cache-aware router
# and a balancing one: where the cache-aware tail (TTFT p90 of the pooled requests, order-statistic
# intervals) stops being lower, and from which load its affinity makes a hotspot. Then whether N
# replicas give N times one, measured and as MVA on the measured centres predicts. Nothing shows for
# a campaign without a router.

# %%
from stackbook.analysis import routing_findings

display(Markdown("\n".join(f"* {line}" for line in routing_findings.first_screen_lines(result.routing))
                 or "*No replicas behind a router in this campaign.*"))
readable_or_absent(routing_findings.crossover_table(result.routing), "no cache-aware and balancing routers to compare")

# %%
readable_or_absent(routing_findings.deployment_table(result.routing), "no arm ran replicas behind a router")

# %% [markdown]
# ## Figures
#
# Saved under `figures/` beside this notebook. First the verdict's own numbers: each arm's figure
# at each load with its interval, from the table above (a hollow point is not ranked; the
# footnote says why; a shaded load is one whose decision rests on fewer than two degrees of
# freedom, weak; an interval the clipped axis cuts is marked at its edge with its true end). Then
# every repetition's points apart, where a black marker shows a point that is not ranked (its arm
# on HOLD, not comparable, or the point discarded); the legend gives the reason.

# %%
from stackbook.analysis import interval_plots

interval_plots.figure_vs_load(table, "output_throughput", confidence, figures, result.decisions)

# %%
interval_plots.figure_vs_load(table, "ttft_p50", confidence, figures, result.decisions)

# %%
interval_plots.figure_vs_load(table, "e2e_p50", confidence, figures, result.decisions)

# %%
plots.latency_vs_load(df, figures, "e2e_ms")

# %%
plots.latency_vs_load(df, figures, "ttft_ms")

# %%
plots.latency_vs_load(df, figures, "tpot_ms")

# %%
plots.throughput_vs_concurrency(df, figures)

# %% [markdown]
# ## Throughput against tail latency
#
# Each point is one arm at one load. The frontier keeps the points no other point beats on both
# axes at once, decidedly (their intervals part on both axes); everything else is dominated. An
# arm that reaches the highest throughput only by pushing its tail far out sits at the right of
# the frontier: fine for batch work, wrong for a chat product.

# %%
interval_plots.pareto_with_intervals(table, confidence, figures)

# %%
plots.pareto(df, figures)

# %%
readable(decide.pareto_frontier(table), "the frontier") if not table.empty else None

# %% [markdown]
# ## Interactivity against throughput per device
#
# The field's standard picture: what one user gets (tokens/s per user, 1000 / TPOT p50, the
# interactivity InferenceX plots as 1/TPOT) against what the hardware serves (output tokens/s per
# device: per logical CPU on this host). Raising the load moves an arm down and to the right; a
# point is dominated only where another ranked point's intervals clear it on both axes.

# %%
from stackbook.analysis import interactivity

devices = interactivity.host_devices(json.loads(run.manifest.read_text()))
interactivity.interactivity_figure(table, devices, confidence, figures)

# %%
readable(interactivity.interactivity_table(table, devices), "interactivity") if not table.empty else None

# %% [markdown]
# ## Inside the SLO
#
# The highest load each arm sustained with at least the SLO's share of requests inside every bound
# (TTFT and TPOT): by its estimate, and by its whole interval (the Wilson interval of the pooled
# requests or the spread over repetitions, whichever is wider). Beside them, each load's exact
# binomial verdict: the highest load proven inside and the lowest proven outside bound the
# capacity, and a load the sample cannot decide says how many requests would. Few requests cannot
# show a high share: 64 that all met the SLO cannot prove 99% at 95% confidence; 299 can.

# %%
protocol = campaign.protocol
readable(decide.slo_capacity(table, protocol.slo.attainment, protocol.decision.confidence)) if not table.empty else None

# %% [markdown]
# ## Capacity, searched
#
# Where the protocol asks for it, each repetition of each arm searched its highest concurrency
# inside the SLO (`protocol.capacity`): doubling until a probe was proven outside, then bisecting.
# An arm's capacity is what every repetition proved: the highest load proven inside in all of them
# and the lowest proven outside in all of them, so one lucky round never widens the claim. Beside
# it, what the arithmetic predicted and its error against that interval (0 inside it; otherwise the
# relative distance to the nearer end, positive when it predicted more), and the cost of a million
# output tokens at the capacity's lower end from the campaign's prices.

# %%
from stackbook.analysis import capacity_plots

capacity_rows = pd.DataFrame(result.capacity)
(capacity_plots.capacity_search_figure(result.capacity, arms, figures)
 or Absent("no capacity search in this campaign: set protocol.capacity to run one"))

# %%
if not capacity_rows.empty:
    display(Markdown("\n".join(f"- {s}" for s in capacity_rows["sentence"])))
readable_or_absent(capacity_rows.drop(columns=["sentence"], errors="ignore"),
                   "no capacity search in this campaign", "capacity per arm")

# %%
from stackbook.analysis.capacity_summary import predictions_display

readable_or_absent(predictions_display(result.capacity_predictions), "no capacity search to set predictions against",
                   "the arithmetic against the measured capacity")

# %% [markdown]
# ## How close to the hardware's bound
#
# Single-stream decode (concurrency 1) against the memory-bandwidth bound from the sizing
# notebook: each token must read all the weights once. A low share points at overheads above the
# kernels (host, runtime); a share near 100% says the hardware itself is the limit.

# %%
readable_or_absent(analysis.roofline_efficiency(arms, df) if not df.empty else pd.DataFrame(),
                   "no closed-loop point at concurrency 1 with a sizing bound to set it against")

# %% [markdown]
# ## Measured demand map
#
# Where each arm's time went, by resource centre: the client process, the engine's front end and
# its compute, each CPU second owned by one process, turned into demand per request by the
# utilisation law (busy seconds / requests completed) at the highest-load valid point. The
# bottleneck's bound, 1000 / max(D/m) req/s, sits beside the highest throughput the arm measured,
# each over the same CPU window as the demands, and each centre's busy fraction says how much of
# that window it worked. A measured throughput above the bound is said in words, with the bound's
# interval in req/s; beyond that interval the map is marked *invalid*, with the assumption that
# broke, and ranks nothing. Then the next experiment: one candidate per centre, ranked by what the
# model predicts a 10% cut buys end to end at the load tested (a closed loop's clients, a replayed
# log's sessions as the closed loop they are, or an open loop's offered rate), only those inside the
# SLO, and only where the model lands within 10% of its own point's mean E2E. An arm without a map
# says why (a run recorded before these counters existed reads *not measured*).

# %%
from stackbook.analysis import demand_map

maps = demand_map.measured_demand_maps(run)
readable(demand_map.bound_table(maps))

# %%
for arm, d in maps.items():
    display(Markdown(f"**{arm}**: {d.status}" + (f" (demands at {d.point})" if d.point else "")))
    if d.measured:
        display(readable(demand_map.centres_table(d)), readable(demand_map.next_experiment_table(d)))
        if d.next_experiments_note:
            display(Markdown(f"*{d.next_experiments_note}*"))
plots.measured_demand_bars(maps, figures)

# %% [markdown]
# The same demands by the second seed's layers: each centre above belongs to one layer (the client
# and the API server to host execution, the scheduler to the runtime, the compute to the
# kernels, a router to orchestration), silicon is the single-stream decode rate over the
# memory-bandwidth bound, and a layer this engine's counters cannot split out says why.

# %%
readable_or_absent(demand_map.layers_by_arm(maps, analysis.roofline_efficiency(arms, df) if not df.empty else None),
                   "No arm has a measured demand map.")

# %% [markdown]
# ## A queueing model of each arm, checked on the loads it was not fitted on
#
# A closed-loop benchmark is a closed queueing network: N clients, each waiting for its reply. We
# fit a two-center model per arm on its lightest and its heaviest load only, each the mean over
# that load's repetitions: a queueing center whose demand is the inverse of the saturation
# throughput (the bottleneck), and a delay center for the rest of the light-load response (work
# that overlaps across requests, as batched decoding does). Only ranked points enter: a discarded
# point, or an arm kept out of the ranking, fits nothing. Exact Mean Value Analysis then predicts
# every load in between; the error at those loads, which the fit never read, says how far to trust
# the model at loads that were not tested. A sweep of two loads leaves none between: the table says
# so for each such arm, and its model only restates the two loads it was fitted on.

# %%
curves, errors = analysis.queueing_fits(df, fair) if not df.empty else (pd.DataFrame(), pd.DataFrame())
plots.predicted_vs_measured(curves, figures)

# %%
readable(errors) if not errors.empty else Markdown("*No ranked arm has closed-loop points at two loads: no model "
                                                   "fitted.*")

# %% [markdown]
# ## Distributions: TTFT, TPOT and ITL
#
# One empirical CDF per arm and point, over the measured requests that succeeded, with the number
# of requests (or gaps) in the legend and the SLO bound dotted. TPOT is one value per request;
# ITL is every gap between two chunks, so its tail shows the stalls a reader of the stream sees.

# %%
measured = {n: a["requests"] for n, a in arms.items() if not a["requests"].empty}
plots.ttft_distribution(measured, figures, campaign.protocol.slo)

# %%
plots.tpot_itl_distribution(measured, figures, campaign.protocol.slo)

# %% [markdown]
# ## Passports
#
# The four parts per arm, as written to `arms/<arm>/passport.md`. Raw evidence:
# `arms/<arm>/requests.jsonl` (every request, every chunk time) and `arms/<arm>/engine.log`.

# %%
for passport in analysis.passports(arms):
    display(Markdown(passport))

# %% [markdown]
# ## Queueing on the open-loop points
#
# On an open-loop point requests arrive on a clock whatever the engine does, so the point is an
# open queue and the textbook formulas can be checked on it. Per point: C_a, the coefficient of
# variation of the realized gaps between sends (sentinels included: they hold slots of the same
# schedule); the service times and their C_s; the utilisation ρ = λ·S from the realized arrival
# rate λ and the mean service time S (in a stable queue the throughput is λ; a server cannot serve
# faster than 1/S, so only λ shows an overloaded point as ρ ≥ 1, where no mean wait exists); the
# measured mean queue wait with its 95% confidence interval (by batch means, since successive
# waits in a queue are correlated); and what Kingman's G/G/1 approximation and, where arrivals are
# Poisson, the Pollaczek-Khinchine M/G/1 formula predict from those same numbers, with the error.
#
# Where the engine serves one request at a time in arrival order (llama-server with one slot),
# every wait and service time follows exactly from the client's send and end times by Lindley's
# recursion, and the data must bear the assumption out (requests complete in send order). An
# engine that batches several sequences is not a single-server queue: its wait is the engine's
# queue-time mean where the point records it, otherwise the mean TTFT above the arm's light-load
# TTFT, and no formula is set beside it. A discarded point is shown, crossed, and kept out of the
# conclusions. At one mean rate, the burstier stream should wait longer: `campaigns/burstiness.yaml`
# sweeps exactly that.

# %%
from stackbook.analysis import open_loop_waits

waits = open_loop_waits.open_loop_points(campaign, arms, df)
if waits.empty:
    display(Absent(open_loop_waits.absent_because(campaign, arms)))
else:
    display(readable(open_loop_waits.display_table(waits)))
    display(Markdown("\n".join(f"* {line}" for line in open_loop_waits.conclusions(waits))))
plots.waits_vs_arrival_variance(waits, figures)  # None, so nothing shown, without an open-loop point
