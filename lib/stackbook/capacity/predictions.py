"""The arithmetic against the measured capacity: each prediction of how many concurrent users an
arm carries, and its error against the searched interval.

Four predictions speak to different limits, and each says which:
- sizing's live sequences: how many sequences of the protocol's context the cache pool holds, by
  the memory arithmetic (a memory bound; past it requests queue, but latency may fail the SLO
  well before);
- the engine's own limit on live sequences (its slots or max_num_seqs), as it reported it;
- MVA on the demand map's centres: the concurrency at which the model's mean E2E reaches the E2E
  the SLO allows (demands measured at one load, so biased elsewhere);
- MVA fitted on the sweep's lightest load and the load of its highest throughput
  (`analysis.queueing.fit_closed_loop`), the same question from two points; where the highest
  throughput was at the lightest load, both come from that load and the prediction is named so.
Both MVA predictions hold a mean E2E to a bound the SLO sets for a share of requests (a
percentile), so they lean optimistic where the spread is wide; each basis says so, and the error
column shows by how much.
"""
from __future__ import annotations

from collections.abc import Callable


def interval_error(predicted: float | None, lower: float | None, upper: float | None,
                   integer: bool = True) -> float | None:
    """0 where the prediction is a load the capacity may be: from the highest proven inside up to,
    not including, the lowest proven outside (for whole loads, up to one below it). Elsewhere, its
    relative distance to the nearest such load (positive: it predicted more than was measured).
    None without a prediction or a measured end, or above a one-sided interval."""
    if predicted is None or (lower is None and upper is None):
        return None
    if lower is not None and predicted < lower:
        return predicted / lower - 1
    if upper is not None and predicted >= upper:
        highest = upper - 1 if integer and upper - 1 >= (lower or 1) else upper
        return predicted / highest - 1
    if upper is None:
        return None  # above a load proven inside, none proven outside: neither confirmed nor refuted
    return 0.0


def largest_within(response_ms: Callable[[int], float], bound_ms: float, most: int) -> int | None:
    """The largest concurrency n ≤ most whose predicted mean response stays within the bound
    (responses grow with n); None when even one client exceeds it."""
    best = None
    for n in range(1, most + 1):
        if response_ms(n) > bound_ms:
            break
        best = n
    return best


def combined_interval(rounds: list[dict]) -> tuple[float | None, float | None, str]:
    """Over the repetitions' searches: the highest load proven inside in every round (the smallest
    of their lower ends) and the lowest proven outside in every round (the largest upper end), so a
    round that saw less is never overruled; and whether the rounds agree."""
    if not rounds:
        return None, None, "no search ran"
    lowers = [r.get("lower") for r in rounds]
    uppers = [r.get("upper") for r in rounds]
    lower = None if any(x is None for x in lowers) else min(lowers)
    upper = None if any(x is None for x in uppers) else max(uppers)
    if len({(a, b) for a, b in zip(lowers, uppers)}) == 1:
        agree = f"all {len(rounds)} repetitions found the same interval"
    else:
        agree = ("the repetitions differ (" + "; ".join(f"[{_g(a)}, {_g(b)}]" for a, b in zip(lowers, uppers))
                 + "): the interval keeps what every one of them proved")
    return lower, upper, agree


def _g(x) -> str:
    return "none" if x is None else f"{x:g}"


def cost_per_m_output_tokens(hour_usd: float, output_tok_s: float | None) -> float | None:
    """Dollars per million output tokens when the hardware streams `output_tok_s` all hour."""
    if not output_tok_s or output_tok_s <= 0:
        return None
    return hour_usd / (output_tok_s * 3600) * 1e6
