"""The search loop: measure the incumbent, check the accept rule on the A/A knobs, then step by
step rank the changes on the bottleneck, measure the chosen one against the incumbent over
interleaved rounds, keep it only when ahead by the margin, and go on until a budget is spent or
nothing is predicted to help. Every step is appended to the record as it ends; a record already
there is resumed from its last step."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from stackbook.search import record as rec
from stackbook.engines.knobs import Knob, Value
from stackbook.analysis.decision import look_confidence
from stackbook.search.step import Judgement, Point, bottleneck, choose, judge, mean_goodput, rank, stop_reason

# measure(config, seed) -> one point of that configuration at the campaign's load
Measure = Callable[[dict[str, Value], int], Point]


@dataclass(frozen=True)
class Plan:
    knobs: tuple[Knob, ...]            # the knobs to try (A/A ones among them are checked, never adopted)
    incumbent: dict[str, Value]
    rounds: int = 3
    max_rounds: int = 6                # undecided after `rounds`: one more round at a time up to this
    margin: float = 0.05
    confidence: float = 0.95
    max_steps: int = 8
    max_s: float = float("inf")
    error_floor: float = 0.05


def compare(measure: Measure, inc: dict, cand: dict, plan: Plan, seed: int
            ) -> tuple[list[Point], list[Point], Judgement]:
    """Interleaved rounds, the order alternating, so a drift a round shares falls on both; judged
    after `rounds` and after each round added while undecided, each look at the confidence that
    keeps the error over all the looks at 1 - confidence."""
    looks = max(1, plan.max_rounds - plan.rounds + 1)
    level = look_confidence(plan.confidence, looks)
    a: list[Point] = []
    b: list[Point] = []
    for r in range(max(plan.rounds, plan.max_rounds)):
        first, second = (inc, cand) if r % 2 == 0 else (cand, inc)
        p1, p2 = measure(first, seed + 2 * r), measure(second, seed + 2 * r + 1)
        a.append(p1 if r % 2 == 0 else p2)
        b.append(p2 if r % 2 == 0 else p1)
        if len(a) >= plan.rounds:
            j = judge([p.goodput_tok_s for p in a], [p.goodput_tok_s for p in b], plan.margin, level)
            if j.decision != "undecided":
                break
    return a, b, j


def _spent(points: list[Point]) -> float:
    return sum(p.duration_s for p in points)


def run_search(measure: Measure, predict: Callable[[dict], float], plan: Plan, path: Path,
               seed: int = 0) -> list[rec.StepRecord]:
    """Run (or resume) the search; every step, the stop included, is in the returned list and the file."""
    steps = rec.read(path)
    if steps and steps[-1].kind == "stop":
        return steps

    def add(r: rec.StepRecord) -> None:
        rec.append(path, r)
        steps.append(r)

    if not steps:
        pts = [measure(plan.incumbent, seed + r) for r in range(plan.rounds)]
        add(rec.StepRecord(index=0, kind="baseline", hypothesis="the incumbent, measured before any change",
                           incumbent_after=plan.incumbent, points_after=pts, bottleneck_after=bottleneck(pts),
                           spent_s=_spent(pts)))
    for k in (k for k in plan.knobs if k.control):
        if any(s.kind == "control" and s.control_knob == k.name for s in steps):
            continue
        last = steps[-1]
        v = next(x for x in k.values if x != last.incumbent_after[k.name])
        a, b, j = compare(measure, last.incumbent_after, {**last.incumbent_after, k.name: v}, plan,
                          seed + 1000 * len(steps))
        add(rec.StepRecord(index=len(steps), kind="control", control_knob=k.name, control_value=v,
                           hypothesis=f"A/A: {k.name}={v!r} changes nothing, so the rule must not accept it",
                           bottleneck_before=last.bottleneck_after, judgement=j, accepted=j.accepted,
                           incumbent_rounds=[p.goodput_tok_s for p in a], candidate_rounds=[p.goodput_tok_s for p in b],
                           incumbent_after=last.incumbent_after, points_after=a, bottleneck_after=bottleneck(a),
                           tried_after=last.tried_after, spent_s=last.spent_s + _spent(a + b)))
    while True:
        last = steps[-1]
        inc, pts = last.incumbent_after, last.points_after
        layer = bottleneck(pts)
        tried = set(map(tuple, last.tried_after))
        chosen = None
        for together in (1, 2):  # two knobs at once only where no single one is predicted to help
            chosen = choose(rank(inc, list(plan.knobs), predict, mean_goodput(pts), layer, plan.error_floor,
                                 tried, together), plan.margin)
            if chosen:
                break
        done = sum(s.kind == "candidate" for s in steps)
        why = stop_reason(done, plan.max_steps, last.spent_s, plan.max_s, chosen)
        if why:
            add(rec.StepRecord(index=len(steps), kind="stop", hypothesis="none left to test", bottleneck_before=layer,
                               incumbent_after=inc, points_after=pts, bottleneck_after=layer,
                               tried_after=last.tried_after, spent_s=last.spent_s, stop_reason=why))
            return steps
        cand = {**inc, **chosen.changes}
        a, b, j = compare(measure, inc, cand, plan, seed + 1000 * len(steps))
        where = "on" if chosen.on_bottleneck else f"off the bottleneck ({layer}: nothing there predicted to help), on"
        after, after_pts = (cand, b) if j.accepted else (inc, a)
        tried = [] if j.accepted else [*last.tried_after, chosen.key]
        add(rec.StepRecord(index=len(steps), kind="candidate", bottleneck_before=layer, change=chosen,
                           hypothesis=f"{layer} limits goodput; {chosen.words()} ({where} "
                                      f"{'/'.join(chosen.layers)}) gains {chosen.gain_words()} "
                                      f"(model error {chosen.model_error:.0%})",
                           judgement=j, accepted=j.accepted, incumbent_rounds=[p.goodput_tok_s for p in a],
                           candidate_rounds=[p.goodput_tok_s for p in b], incumbent_after=after,
                           points_after=after_pts, bottleneck_after=bottleneck(after_pts), tried_after=tried,
                           spent_s=last.spent_s + _spent(a + b)))
