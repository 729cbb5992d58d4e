"""The search report, from the step records alone: the path step by step, the final
configuration against the default with their goodput inside the SLO, and the knobs and values
never tried, each with why."""
from __future__ import annotations

from stackbook.engines.knobs import Knob, Value
from stackbook.search.record import StepRecord
from stackbook.search.step import mean_goodput


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x - 1:+.1%}"


def _cfg(c: dict[str, Value]) -> str:
    return ", ".join(f"{k}={v}" for k, v in c.items())


def never_tried(steps: list[StepRecord], knobs: tuple[Knob, ...]) -> list[str]:
    """Each knob value no step measured, with why: an A/A knob is never adopted; the others were
    not predicted to clear the margin from any incumbent the search held, or the budget ended first."""
    tried = {(k, repr(v)) for s in steps if s.change for k, v in s.change.changes.items()}
    tried |= {(s.control_knob, repr(s.control_value)) for s in steps if s.control_knob}
    stop = next((s.stop_reason for s in steps if s.kind == "stop"), None) or "the search has not ended"
    held = [s.incumbent_after for s in steps]
    out = []
    for k in knobs:
        for v in k.values:
            if (k.name, repr(v)) in tried or any(h.get(k.name) == v for h in held):
                continue
            why = "an A/A value: checked once, never adopted" if k.control else f"not measured ({stop})"
            out.append(f"{k.name}={v!r} ({k.layer}): {why}")
    return out


def report_text(name: str, steps: list[StepRecord], knobs: tuple[Knob, ...], default: dict[str, Value],
                load: str | None = None, capacity: list[str] = ()) -> str:
    """The report; `load` says, where the search found it, which load every step was measured at,
    and `capacity` the default's and the final configuration's capacity and cost, where searched."""
    lines = [f"# Search: {name}", "", *([load, ""] if load else []),
             "| step | kind | hypothesis | predicted gain (model error) | measured gain [interval] | decision | "
             "accepted | bottleneck after |", "|---|---|---|---|---|---|---|---|"]
    for s in steps:
        pred = f"{s.change.gain_words()} (±{s.change.model_error:.0%})" if s.change else "-"
        j = s.judgement
        meas = f"{_pct(j.ratio)} [{_pct(j.lo)}, {_pct(j.hi)}]" if j else "-"
        lines.append(f"| {s.index} | {s.kind} | {s.stop_reason or s.hypothesis} | {pred} | {meas} | "
                     f"{j.decision if j else '-'} | {'yes' if s.accepted else 'no'} | {s.bottleneck_after or '-'} |")
    base = next(s for s in steps if s.kind == "baseline")
    final = steps[-1]
    lines += ["", "## Final configuration against the default", "",
              f"- default: {_cfg(default)}: goodput inside the SLO {mean_goodput(base.points_after):,.1f} tok/s "
              f"(mean of {len(base.points_after)} rounds)",
              f"- final: {_cfg(final.incumbent_after)}: {mean_goodput(final.points_after):,.1f} tok/s "
              f"(mean of {len(final.points_after)} rounds)",
              f"- measurement time: {final.spent_s:,.1f} s; candidates measured: "
              f"{sum(s.kind == 'candidate' for s in steps)}; accepted: "
              f"{sum(s.accepted for s in steps if s.kind == 'candidate')}",
              f"- A/A checks accepted (must be none): {sum(s.accepted for s in steps if s.kind == 'control')}",
              *[f"- {line}" for line in capacity],
              "", "## Never tried", ""]
    lines += [f"- {x}" for x in never_tried(steps, knobs)] or ["- none"]
    return "\n".join(lines) + "\n"
