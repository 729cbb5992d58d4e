"""The capacity search: expand from a start load until a probe is proven outside, then bisect
between the highest load proven inside and the lowest proven outside down to the tolerance.

Why this shape: the capacity's order of magnitude is unknown beforehand, and doubling finds an
upper end in a logarithmic number of probes whatever it is; bisection then halves the interval
per probe, where a ladder at the same resolution pays for every rung. The answer is the interval
itself, both ends proven by their own probes, because a bare number would hide which side of it
was shown and how finely. A load no probe could decide (its attainment too close to the target
for the requests allowed) is a grey point: the search keeps bisecting the gaps around it, and
stops, saying so, when no load between the ends is left to try.
"""
from __future__ import annotations

from stackbook.capacity.probing import CapacityInterval, Probe, SearchPlan, Session


class _State:
    def __init__(self, plan: SearchPlan, session: Session):
        self.plan, self.session = plan, session
        self.lower: float | None = None
        self.upper: float | None = None
        self.grey: set[float] = set()

    def record(self, load: float, verdict: str) -> None:
        if verdict == "inside":
            self.lower = load if self.lower is None else max(self.lower, load)
        elif verdict == "outside":
            self.upper = load if self.upper is None else min(self.upper, load)
        else:
            self.grey.add(load)

    def result(self, reason: str) -> CapacityInterval:
        lo, hi = self.lower, self.upper
        between = sorted(g for g in self.grey if (lo is None or g > lo) and (hi is None or g < hi))
        return CapacityInterval(lo, hi, self.plan.resolved(lo, hi), reason, tuple(self.session.history),
                                tuple(between))


def _fmt(load: float | None) -> str:
    return "none" if load is None else f"{load:g}"


def _expand(st: _State) -> str | None:
    """Double from the start until a probe is proven outside; a reason when the search ends here."""
    plan = st.plan
    load = plan.round(plan.start)
    while True:
        v = st.session.decide(load)
        if v is None:
            return st.session.stop_reason
        if v.verdict == "undecided" and plan.on_undecided == "stop":
            st.record(load, v.verdict)
            return f"undecided at {load:g}, not re-probed: {v.reason}"
        st.record(load, v.verdict)
        if v.verdict == "outside":
            return None
        if load >= plan.max_load:
            what = "inside" if v.verdict == "inside" else "undecided"
            return f"{what} at the largest load allowed, {load:g}: the capacity may lie above it"
        load = min(plan.round(2 * load), plan.max_load)


def _descend(st: _State) -> str | None:
    """Halve below a start that was not inside until a probe is proven inside."""
    plan = st.plan
    tried = [g for g in st.grey] + ([st.upper] if st.upper is not None else [])
    load = min(tried) if tried else plan.round(plan.start)
    while st.lower is None:
        nxt = plan.round(max(load / 2, plan.min_load))
        if nxt >= load:
            return f"nothing proven inside down to the smallest load allowed, {plan.min_load:g}"
        v = st.session.decide(nxt)
        if v is None:
            return st.session.stop_reason
        st.record(nxt, v.verdict)
        if v.verdict == "undecided" and plan.on_undecided == "stop":
            return f"undecided at {nxt:g}, not re-probed: {v.reason}"
        load = nxt
    return None


def _bisect(st: _State) -> str:
    plan = st.plan
    while not plan.resolved(st.lower, st.upper):
        lo, hi = st.lower, st.upper
        assert lo is not None and hi is not None
        points = [lo, *sorted(g for g in st.grey if lo < g < hi), hi]
        gaps = [(plan.width(a, b), a, b) for a, b in zip(points, points[1:]) if plan.midpoint(a, b) is not None]
        if not gaps:
            return (f"undecided: every load tried between {lo:g} (inside) and {hi:g} (outside) stayed undecided "
                    f"({', '.join(f'{g:g}' for g in points[1:-1])})")
        _, a, b = max(gaps)
        mid = plan.midpoint(a, b)
        assert mid is not None
        v = st.session.decide(mid)
        if v is None:
            return st.session.stop_reason or "budget spent"
        st.record(mid, v.verdict)
        if v.verdict == "undecided" and plan.on_undecided == "stop":
            return f"undecided at {mid:g}, not re-probed: {v.reason}"
    tol = f"{plan.tolerance:g}" if plan.integer else f"{plan.tolerance:.0%}"
    return f"resolved: inside at {_fmt(st.lower)}, outside at {_fmt(st.upper)}, within the tolerance {tol}"


def search_capacity(probe: Probe, plan: SearchPlan) -> CapacityInterval:
    """Expand, descend if the start was not inside, then bisect; the interval and every probe."""
    st = _State(plan, Session(probe, plan))
    reason = _expand(st)
    if reason is None and st.lower is None:
        reason = _descend(st)
    if reason is None:
        reason = _bisect(st)
    return st.result(reason)
