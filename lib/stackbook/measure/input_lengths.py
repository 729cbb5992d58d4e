"""Whether a replay delivered the trace's input lengths: the prompt lengths the engine counted on
the measured requests against the lengths the trace states, by a two-sample Kolmogorov-Smirnov
test. A replay that drops rows (failures, a session cut short), or a synthesis that misses its
lengths, moves the realized distribution away from the trace's; the test says by how much."""
from __future__ import annotations

from statistics import median

from scipy.stats import ks_2samp

from stackbook.loadgen.phases import Phase
from stackbook.loadgen.workload import recorded_prompts

MATCH_P = 0.05  # a p-value above this: the test finds no difference between the two distributions


def realized_lengths(records) -> tuple[list[int], str]:
    """The measured, answered requests' prompt lengths as the engine counted them (its usage), or as
    the client counted them where the engine reports none; and which of the two it is."""
    kept = [r for r in records if r.phase == Phase.MEASURE and r.ok]
    if kept and all(r.prompt_tokens_server for r in kept):
        return [r.prompt_tokens_server for r in kept], "engine"
    return [r.prompt_tokens_client for r in kept], "client"


def trace_input_lengths(arrival, level, tokenizer) -> list[int] | None:
    """The trace's prompt lengths in the client's tokens: a log's recorded prompts counted as they
    are sent, a lengths-only trace's own figures (its prompts are synthesized to them); None for a
    pattern whose lengths the workload decides."""
    lengths = arrival.prompt_lengths(level)
    if lengths is None:
        return None
    recorded = arrival.recorded_messages(level)
    if recorded is None:
        return [p for p, _ in lengths]
    return [p.prompt_tokens_client for p in recorded_prompts(recorded, [o for _, o in lengths], tokenizer)]


def input_length_match(trace_lengths: list[int], records) -> dict | None:
    """The KS statistic and p-value of the realized prompt lengths against the trace's, with both
    medians; None where either side has fewer than two requests."""
    realized, source = realized_lengths(records)
    if len(realized) < 2 or len(trace_lengths) < 2:
        return None
    test = ks_2samp(trace_lengths, realized)
    return {"trace_requests": len(trace_lengths), "realized_requests": len(realized), "counted_by": source,
            "trace_median": median(trace_lengths), "realized_median": median(realized),
            "ks_statistic": round(float(test.statistic), 4), "p_value": round(float(test.pvalue), 4),
            "matches": bool(test.pvalue > MATCH_P)}
