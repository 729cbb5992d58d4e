"""One step of the search loop as pure functions: the incumbent's bottleneck from its measured
points, the model's error on the incumbent, the candidate changes ranked by predicted gain, the
one chosen, and the verdict on it after interleaved rounds.

Why this shape: the model (a bound or MVA prediction) is cheap and roughly right, a measurement
is dear and right; so the model only orders the candidates and names the one worth a
measurement, and only the measurement, judged by the project's rule (analysis.decision, paired
by round, the whole interval beyond the margin), moves the incumbent.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from pydantic import BaseModel, ConfigDict

from stackbook.analysis.decision import AHEAD, Compared, decide, paired_ratio_interval
from stackbook.engines.knobs import Knob, Layer, Value

GOODPUT = Compared("goodput", "goodput_tok_s", "goodput inside the SLO", "tok/s", True)
MOST_GAIN = 100.0  # a gain predicted from nothing (the incumbent's goodput zero) ranks as +10,000%
NOTHING_TOK_S = 1e-3  # a goodput under a thousandth of a token a second is none (a model's erf tail)


class Point(BaseModel):
    """One measurement of one configuration at the campaign's load: its goodput (output tokens
    per second of the requests that met the SLO) and where its requests' time went."""
    model_config = ConfigDict(frozen=True)

    goodput_tok_s: float
    requests: int
    met: int
    wait_s: float      # mean time before a request's first token beyond one step of its own
    decode_s: float    # mean time from the first token to the last
    duration_s: float  # what the measurement cost: wall seconds, or model seconds when simulated


def point_from_requests(requests: Iterable[tuple[float, float, int]], duration_s: float,
                        ttft_s: float | None, tpot_s: float | None) -> Point:
    """A point from (TTFT, TPOT, output tokens) per measured request over `duration_s` seconds."""
    rows = list(requests)
    if not rows or duration_s <= 0:
        raise ValueError("a point needs at least one measured request and a positive duration")
    ok = [(t, p, n) for t, p, n in rows if (ttft_s is None or t <= ttft_s) and (tpot_s is None or p <= tpot_s)]
    wait = sum(max(0.0, t - p) for t, p, _ in rows) / len(rows)
    decode = sum(p * (n - 1) for _, p, n in rows) / len(rows)
    return Point(goodput_tok_s=sum(n for _, _, n in ok) / duration_s, requests=len(rows), met=len(ok),
                 wait_s=wait, decode_s=decode, duration_s=duration_s)


def request_rows(records: Iterable) -> list[tuple[float, float, int]]:
    """(TTFT, TPOT, output tokens) of each measured request record, as the client timed them; a
    one-token reply's TPOT is its decode time over one token. Raises where any failed: a point
    with failed requests is not a measurement of the configuration."""
    rows, failed = [], 0
    for r in records:
        if not r.ok or r.first_token_s is None:
            failed += 1
            continue
        n = r.output_tokens_server or 0
        rows.append((r.first_token_s - r.sent_s, (r.end_s - r.first_token_s) / max(1, n - 1), n))
    if failed:
        raise RuntimeError(f"{failed} of {failed + len(rows)} measured requests failed")
    return rows


def point_from_records(records: list, ttft_s: float | None, tpot_s: float | None) -> Point:
    """A point from measured request records, over the span from the first send to the last reply."""
    window = max(r.end_s for r in records) - min(r.sent_s for r in records)
    return point_from_requests(request_rows(records), window, ttft_s, tpot_s)


def bottleneck(points: list[Point]) -> Layer:
    """Where the incumbent's requests spend their time: waiting for a slot (orchestration: the
    batch limit, admission) or being decoded (kernels: the step's cost)."""
    wait = sum(p.wait_s for p in points)
    decode = sum(p.decode_s for p in points)
    return "orchestration" if wait > decode else "kernels"


def mean_goodput(points: list[Point]) -> float:
    return sum(p.goodput_tok_s for p in points) / len(points)


def model_error(measured: float, predicted: float, floor: float) -> float:
    """The model's relative error on the incumbent, never under the kind's stated floor (one
    point cannot show the error on the others); 1 (100%) when it predicts nothing."""
    if predicted <= NOTHING_TOK_S:
        return 1.0 if measured > NOTHING_TOK_S else floor
    return max(floor, abs(measured / predicted - 1))


class Candidate(BaseModel):
    """One change from the incumbent (one knob, or two where no single one is predicted to help),
    with the model's gain for it."""
    model_config = ConfigDict(frozen=True)

    changes: dict[str, Value]
    layers: tuple[Layer, ...]
    predicted_goodput: float
    predicted_gain: float        # relative to the incumbent's prediction
    model_error: float
    on_bottleneck: bool
    from_nothing: bool = False   # the incumbent is predicted and measured to serve none: no ratio exists

    def gain_words(self) -> str:
        """The predicted gain as a share, or, over an incumbent that serves none, as what the
        candidate is predicted to serve."""
        if self.from_nothing:
            return f"{self.predicted_goodput:,.1f} tok/s where the incumbent serves none"
        return f"{self.predicted_gain:+.0%}"

    @property
    def key(self) -> tuple[str, str]:
        return ("+".join(self.changes), repr(tuple(self.changes.values())))

    def words(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.changes.items())


def predicted_gain(candidate: float, incumbent_predicted: float, incumbent_measured: float) -> float:
    """The candidate against the incumbent, both from the model; against the measurement where
    the model gives the incumbent nothing."""
    base = incumbent_predicted if incumbent_predicted > NOTHING_TOK_S else incumbent_measured
    if base <= NOTHING_TOK_S:
        return MOST_GAIN if candidate > NOTHING_TOK_S else 0.0
    return min(MOST_GAIN, candidate / base - 1)


def changes_from(incumbent: dict[str, Value], knobs: list[Knob], together: int) -> list[tuple[tuple[Knob, Value], ...]]:
    """Every change of `together` (1 or 2) knobs from the incumbent; A/A knobs never among them."""
    real = [k for k in knobs if not k.control]
    singles = [(k, v) for k in real for v in k.values if v != incumbent[k.name]]
    if together == 1:
        return [(c,) for c in singles]
    return [(a, b) for i, a in enumerate(singles) for b in singles[i + 1:] if a[0].name != b[0].name]


def rank(incumbent: dict[str, Value], knobs: list[Knob], predict: Callable[[dict], float],
         measured: float, layer: Layer, error_floor: float,
         tried: set[tuple[str, str]] = frozenset(), together: int = 1) -> list[Candidate]:
    """Every change not yet tried from this incumbent, best first: those acting on the
    bottleneck before the others, each by predicted gain (over an incumbent that serves none,
    every gain is the same cap: then by predicted goodput)."""
    inc = predict(incumbent)
    err = model_error(measured, inc, error_floor)
    out = []
    for change in changes_from(incumbent, knobs, together):
        cfg = {**incumbent, **{k.name: v for k, v in change}}
        g = predict(cfg)
        c = Candidate(changes={k.name: v for k, v in change}, layers=tuple(k.layer for k, _ in change),
                      predicted_goodput=g, predicted_gain=predicted_gain(g, inc, measured), model_error=err,
                      on_bottleneck=any(k.layer == layer for k, _ in change),
                      from_nothing=max(inc, measured) <= NOTHING_TOK_S)
        if c.key not in tried:
            out.append(c)
    return sorted(out, key=lambda c: (not c.on_bottleneck, -c.predicted_gain, -c.predicted_goodput, c.key))


def choose(ranked: list[Candidate], margin: float) -> Candidate | None:
    """The first candidate predicted to clear the margin: on the bottleneck if any is, else the
    best elsewhere (the bottleneck hypothesis then moves); None: nothing is predicted to help."""
    helps = [c for c in ranked if c.predicted_gain > margin]
    return helps[0] if helps else None


class Judgement(BaseModel):
    """The candidate against the incumbent over interleaved rounds, by the project's rule."""
    model_config = ConfigDict(frozen=True)

    ratio: float | None
    lo: float | None
    hi: float | None
    decision: str
    accepted: bool
    text: str


def judge(incumbent: list[float], candidate: list[float], margin: float, confidence: float) -> Judgement:
    """Accept only when the candidate is ahead: its paired goodput ratio's whole interval beyond
    1 + margin. Where the incumbent served nothing inside the SLO in every round the ratio is
    unbounded: the candidate is ahead when it served some in every round (two rounds at least)."""
    if len(incumbent) != len(candidate):
        raise ValueError(f"interleaved rounds pair up: {len(incumbent)} incumbent, {len(candidate)} candidate")
    if all(i <= 0 for i in incumbent):
        if len(candidate) >= 2 and all(c > 0 for c in candidate):
            return Judgement(
                ratio=None,
                lo=None,
                hi=None,
                decision=AHEAD,
                accepted=True,
                text=f"candidate ahead: it met the SLO in all {len(candidate)} rounds, the incumbent in none",
            )
        return Judgement(ratio=None, lo=None, hi=None, decision="undecided", accepted=False,
                         text="the incumbent met the SLO in no round and the candidate not in every one")
    pairs = [(c, i) for c, i in zip(candidate, incumbent) if i > 0]
    if any(c <= 0 for c, _ in pairs):
        c_all = [c for c, _ in pairs]
        return Judgement(ratio=None, lo=None, hi=None, decision="undecided" if any(c_all) else "behind",
                         accepted=False, text="the candidate met the SLO in none of some rounds the incumbent did")
    c, i = [p[0] for p in pairs], [p[1] for p in pairs]
    try:
        ratio, lo, hi = paired_ratio_interval(c, i, confidence)
    except OverflowError:  # rounds so far apart that the interval leaves the floats: never a win
        return Judgement(ratio=None, lo=None, hi=None, decision="undecided", accepted=False,
                         text="the rounds' ratios span more than floats hold: no interval")
    d = decide(0, GOODPUT, "candidate", "incumbent", (ratio, lo, hi), (len(c), len(i)), (0, 0), margin,
               confidence, "paired by round")
    ok = d.decision == AHEAD and d.leader == "candidate" and lo is not None and lo > 1 + margin
    return Judgement(ratio=None if ratio is None or math.isnan(ratio) else ratio, lo=lo, hi=hi,
                     decision=d.decision, accepted=ok, text=d.text)


def stop_reason(steps: int, max_steps: int, spent_s: float, max_s: float, chosen: Candidate | None) -> str | None:
    """Why the loop ends now, or None to go on."""
    if steps >= max_steps:
        return f"step budget spent: {steps} of {max_steps} steps"
    if spent_s >= max_s:
        return f"time budget spent: {spent_s:.0f} s of {max_s:.0f} s"
    if chosen is None:
        return "no candidate is predicted to clear the margin"
    return None
