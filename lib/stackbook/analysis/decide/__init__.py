"""The three questions before any benchmark: hardware, workload shape, ops capacity.

Pure functions: the 00_decide notebook turns a team's answers into what fits on its hardware (and
what to change first when nothing does), the peak demand its users put in flight, a shortlist
with reasons, and the managed-versus-owned cost arithmetic; the shortlist follows that arithmetic.
"""
from stackbook.analysis.decide.cost import cost_by_volume, cost_summary, managed_vs_owned
from stackbook.analysis.decide.demand import PeakDemand, demand_sentence, demand_table, peak_demand
from stackbook.analysis.decide.hardware import (
    CARD_COUNTS,
    SILICON_EXAMPLES,
    FitPlan,
    FitStep,
    SiliconExample,
    describe_model,
    fit_plan,
    fit_plan_rows,
    hardware_table,
    silicon_table,
    sizing_targets,
)
from stackbook.analysis.decide.shortlist import (
    LONG_CONTEXT_TOKENS,
    MOSTLY_IDLE,
    Answers,
    Arithmetic,
    managed_endpoint_fits,
    shortlist,
    what_each_answer_changes,
)

__all__ = ["CARD_COUNTS", "LONG_CONTEXT_TOKENS", "MOSTLY_IDLE",
           "SILICON_EXAMPLES", "Answers", "Arithmetic", "FitPlan", "FitStep", "PeakDemand",
           "SiliconExample", "cost_by_volume", "cost_summary", "demand_sentence", "demand_table", "describe_model",
           "fit_plan", "fit_plan_rows", "hardware_table", "managed_endpoint_fits", "managed_vs_owned",
           "peak_demand", "shortlist", "silicon_table", "sizing_targets", "what_each_answer_changes"]
