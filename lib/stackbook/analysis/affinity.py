"""Where cache affinity stops paying ("sticky until saturated"): the load at which a cache-aware
router's tail latency crosses a balancing policy's, with intervals, and where its affinity makes a
hotspot. Pure: the tails and imbalances come in per load, the sentences go out.

A tail here is a quantile of the requests pooled over a load's ranked repetitions, with its
order-statistic interval (analysis.tails). The difference affinity - balanced is bracketed by the
intervals: at most hi_a - lo_b, at least lo_a - hi_b. Affinity is surely ahead at a load where the
whole bracket is below zero and surely behind where it is above; the crossing is placed between
the last load it is ahead (by estimates) and the first it is not, linearly interpolated, and its
interval runs from the last load up to which affinity is surely ahead to the first load at which
it is surely behind (a side the sweep cannot bound is None)."""
from __future__ import annotations

from dataclasses import dataclass

from stackbook.analysis.decision import interval

# The busiest replica's requests over the mean at which a policy's affinity is a hotspot, every
# repetition at that load at or above it: with two replicas, one takes 62.5% or more.
HOTSPOT_IMBALANCE = 1.25


@dataclass(frozen=True)
class Tail:
    """One arm's tail at one load: the pooled quantile and its order-statistic interval."""
    estimate: float
    lo: float | None
    hi: float | None
    completed: int

    def text(self) -> str:
        lo = "unbounded" if self.lo is None else f"{self.lo:,.0f}"
        hi = "unbounded" if self.hi is None else f"{self.hi:,.0f}"
        return f"{self.estimate:,.0f} [{lo}, {hi}] ms on {self.completed}"


def difference_bracket(a: Tail, b: Tail) -> tuple[float | None, float | None]:
    """The interval of a - b the two tails' intervals allow (None on a side either leaves open)."""
    low = a.lo - b.hi if a.lo is not None and b.hi is not None else None
    high = a.hi - b.lo if a.hi is not None and b.lo is not None else None
    return low, high


def ordered(a: Tail, b: Tail) -> str:
    """'ahead' where a's tail is surely below b's, 'behind' where surely above, else 'not ordered'."""
    low, high = difference_bracket(a, b)
    if high is not None and high < 0:
        return "ahead"
    if low is not None and low > 0:
        return "behind"
    return "not ordered"


def _crossing_load(l0: float, d0: float, l1: float, d1: float) -> float:
    return l0 + (l1 - l0) * (-d0) / (d1 - d0) if d1 != d0 else l1


def crossover(affinity: dict[float, Tail], balanced: dict[float, Tail], names: tuple[str, str] = ("cache-aware",
              "round robin"), figure: str = "TTFT p90") -> dict:
    """Per load, affinity's tail against the balancing policy's; then where affinity's stops being
    lower: `status` 'crossed' (with `at_load` interpolated between `between`, and `interval`, its
    bracket on the sweep's loads), 'no crossing' (lower at every load swept: up to `up_to`), or
    'never ahead' (not lower at the lightest load). Loads present on one side only are skipped."""
    loads = sorted(set(affinity) & set(balanced))
    if not loads:
        return {"figure": figure, "arms": list(names), "per_load": [], "status": "not measured",
                "text": f"{figure}: no load where both {names[0]} and {names[1]} have a tail"}
    rows = []
    for load in loads:
        a, b = affinity[load], balanced[load]
        low, high = difference_bracket(a, b)
        rows.append({"load": load, "affinity": a.__dict__, "balanced": b.__dict__,
                     "difference_ms": a.estimate - b.estimate, "difference_lo_ms": low, "difference_hi_ms": high,
                     "ordered": ordered(a, b)})
    out = {"figure": figure, "arms": list(names), "per_load": rows}
    # the crossing's bracket: surely ahead up to `sure_to` (every load up to it), surely behind from `behind_from`
    sure_to = None
    for r in rows:
        if r["ordered"] != "ahead":
            break
        sure_to = r["load"]
    behind_from = next((r["load"] for r in rows if r["ordered"] == "behind"), None)
    first = rows[0]
    if first["difference_ms"] >= 0:
        out |= {"status": "never ahead", "at_load": None, "between": None, "interval": [None, behind_from]}
        out["text"] = (f"{figure}: {names[0]} is not ahead of {names[1]} even at the lightest load "
                       f"{first['load']:g} ({_pair(first, names)})")
        return out
    cross = next((i for i in range(1, len(rows)) if rows[i]["difference_ms"] >= 0), None)
    if cross is None:
        last = rows[-1]
        out |= {"status": "no crossing", "up_to": last["load"], "at_load": None, "between": None,
                "interval": [sure_to, None]}
        out["text"] = (f"{figure}: no crossing up to load {last['load']:g}: {names[0]}'s tail is lower at every load "
                       "swept (" + "; ".join(f"at {r['load']:g} {_pair(r, names)}" for r in rows) + ")")
        return out
    before, after = rows[cross - 1], rows[cross]
    at = _crossing_load(before["load"], before["difference_ms"], after["load"], after["difference_ms"])
    out |= {"status": "crossed", "at_load": at, "between": [before["load"], after["load"]],
            "interval": [sure_to, behind_from]}
    if sure_to is None and behind_from is None:
        bracket = "the intervals order the tails at no load swept, so they do not place it"
    else:
        lo = "below the lightest load" if sure_to is None else f"{sure_to:g}"
        hi = f"beyond {rows[-1]['load']:g}, the heaviest swept" if behind_from is None else f"{behind_from:g}"
        bracket = f"from the intervals, between {lo} and {hi}"
    out["text"] = (f"{figure}: {names[0]}'s tail stops being lower than {names[1]}'s near load {at:.3g} by the "
                   f"estimates (between {before['load']:g} and {after['load']:g}; {bracket}): at "
                   f"{before['load']:g} {_pair(before, names)}; at {after['load']:g} {_pair(after, names)}")
    return out


def _pair(row: dict, names: tuple[str, str]) -> str:
    a, b = Tail(**row["affinity"]), Tail(**row["balanced"])
    words = {"ahead": f"{names[0]} lower", "behind": f"{names[1]} lower", "not ordered": "not ordered"}[row["ordered"]]
    return f"{names[0]} {a.text()} against {names[1]} {b.text()}, {words}"


def hotspots(imbalances: dict[float, list[float]], confidence: float = 0.95,
             threshold: float = HOTSPOT_IMBALANCE) -> dict:
    """Per load, a policy's imbalance over its repetitions (mean, range, t interval), the loads at
    which every repetition reads at or above `threshold`, and the lightest of them (None: none)."""
    rows = []
    for load in sorted(imbalances):
        values = [v for v in imbalances[load] if v is not None]
        if not values:
            continue
        iv = interval(values, 0, confidence)
        rows.append({"load": load, "mean": iv.estimate, "lo": iv.lo, "hi": iv.hi, "min": min(values),
                     "max": max(values), "repetitions": len(values), "hotspot": min(values) >= threshold})
    hot = [r["load"] for r in rows if r["hotspot"]]
    return {"threshold": threshold, "per_load": rows, "hotspot_from_load": hot[0] if hot else None,
            "hotspot_loads": hot}
