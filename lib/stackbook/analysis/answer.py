"""The answer block a report opens on: one sentence per question a reader brings (which arm, how
sure, inside which SLO, at what cost, on which host), each with its number and interval or the
reason it has none. Pure functions over a run's stored facts (analysis.json, the manifest, the
campaign as executed, the passports), so a report, the dashboard and the tests say the same."""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from stackbook.analysis.answer_facts import RunFacts
from stackbook.analysis.answer_host import host_of, host_sentence, host_words, precision_words
from stackbook.loadgen.load_point import load_unit
from stackbook.analysis.decision import COMPARED_BY_NAME, confidence_text, weak_note
from stackbook.analysis.routing_findings import policy_answer
from stackbook.analysis.rounds_needed import MOST_ROUNDS, df_per_round, rounds_to_decide
from stackbook.config.protocol import Slo
from stackbook.measure.validity import rate_span, rates_sent, strayed

AHEAD, NO_DIFFERENCE, UNDECIDED = "ahead", "no difference", "undecided"
NO_SPREAD = "one repetition per arm measures no run-to-run spread"
SHOWN_UNDECIDED = 3  # undecided comparisons named on the first screen; the rest are in the decision table


@dataclass(frozen=True)
class Sentence:
    question: str  # the reader's question, a few words
    text: str


# --- loads, figures and intervals in words -------------------------------------------------------

def unit_of(analysis: dict) -> str:
    points = analysis.get("points") or []
    return load_unit([p.get("rate") for p in points], [p.get("speedup") for p in points])


def load_words(unit: str, load) -> str:
    """A load as a reader names it: concurrency 2, offered rate 0.4 req/s, trace speed 1."""
    value = f"{load:g}" if isinstance(load, (int, float)) else str(load)
    return f"{unit} {value}" + (" req/s" if unit == "offered rate" else "")


def _pct(x: float) -> str:
    return f"{100 * x:+.0f}%"


def lead_words(d: dict, leader: str, note: str = "") -> str:
    """How far `leader` is ahead of the other arm on the decision's figure, with the interval."""
    figure = COMPARED_BY_NAME[d["metric"]]
    r, lo, hi = d["ratio"], d["lo"], d["hi"]
    if leader != d["arm_a"]:
        r, lo, hi = 1 / r, 1 / hi, 1 / lo
    other = _other(d, leader)
    if figure.higher_is_better:
        return f"{r - 1:.0%} higher than {other}{note}, {lo - 1:.0%} to {hi - 1:.0%}"
    return f"{1 - r:.0%} lower than {other}{note}, {1 - hi:.0%} to {1 - lo:.0%}"


def weak_words(d: dict) -> str:
    """An interval resting on fewer than two degrees of freedom is weak, and the words say so."""
    return weak_note(d.get("degrees_of_freedom"))


def _other(d: dict, arm: str) -> str:
    return d["arm_b"] if d["arm_a"] == arm else d["arm_a"]


def _strength(d: dict) -> float:
    return abs(math.log(d["ratio"])) if d.get("ratio") else 0.0


def load_outcome(decisions: list[dict]) -> tuple[tuple[str, ...], str]:
    """At one load, on one figure: the arms no other arm beats, and the words for them (the single
    leader's smallest lead, or what lies between the unbeaten arms)."""
    arms = list(dict.fromkeys(a for d in decisions for a in (d["arm_a"], d["arm_b"])))
    beaten = {_other(d, d["leader"]) for d in decisions if d["decision"] == AHEAD and d.get("leader")}
    top = tuple(a for a in arms if a not in beaten)
    if len(top) == 1:
        leads = [d for d in decisions if d["decision"] == AHEAD and d.get("leader") == top[0]]
        nearest = min(leads, key=_strength)
        closest = "" if len(arms) == 2 else ", the next best"
        return top, f"{lead_words(nearest, top[0], closest)}{weak_words(nearest)}"
    between = [d for d in decisions if {d["arm_a"], d["arm_b"]} <= set(top)]
    if len(top) > 2 or len(between) != 1:
        kinds = [f"{n} {k}" for k, n in Counter(d["decision"] for d in between).most_common()]
        return top, f"no order among them: {', '.join(kinds) or 'not compared'}"
    d = between[0]
    span = (f"{_pct(d['lo'] - 1)} to {_pct(d['hi'] - 1)}" if d.get("lo") is not None
            else f"no interval, {NO_SPREAD}")
    if d["decision"] == NO_DIFFERENCE:
        return top, f"between them no difference beyond the margin: {span}{weak_words(d)}"
    return top, f"between them undecided: {span}"


def _grouped(outcomes: list[tuple[float, tuple[str, ...], str]], unit: str) -> list[str]:
    """Consecutive loads with the same unbeaten arms as one clause (one parenthesis where their words agree)."""
    groups: list[tuple[tuple[str, ...], list[tuple[float, str]]]] = []
    for load, top, words in outcomes:
        if groups and groups[-1][0] == top:
            groups[-1][1].append((load, words))
        else:
            groups.append((top, [(load, words)]))
    clauses = []
    for top, items in groups:
        loads = [f"{load:g}" if isinstance(load, (int, float)) else str(load) for load, _ in items]
        if len({w for _, w in items}) == 1:
            where = (load_words(unit, items[0][0]) if len(items) == 1
                     else f"{unit} " + _listed(loads) + (" req/s" if unit == "offered rate" else ""))
            at = f"{where} ({items[0][1]})"
        else:
            at = " and ".join(f"{load_words(unit, load) if i == 0 else loads[i]} ({w})"
                              for i, (load, w) in enumerate(items))
        clauses.append(f"{' or '.join(top)} at {at}")
    return clauses


# --- which arm ------------------------------------------------------------------------------------

def primary_of(analysis: dict) -> str:
    return (analysis.get("decision_rule") or {}).get("primary") or "output_throughput"


def not_ranked(analysis: dict) -> list[str]:
    """Arms the verdict keeps out of the ranking, each with its reason."""
    out = []
    for name, a in (analysis.get("arms") or {}).items():
        if a.get("label") != "accepted" or not a.get("comparable", True):
            differs = f": {', '.join(a['differs'])} differs" if a.get("differs") else ""
            out.append(f"{name} ({a.get('label')}{differs})")
    return out


def leads(analysis: dict) -> str | None:
    """Which arm to run at each load on the primary figure, as clauses; None when nothing was compared."""
    primary = primary_of(analysis)
    mine = [d for d in analysis.get("decisions") or [] if d.get("metric") == primary
            and d.get("metric") in COMPARED_BY_NAME]
    if not mine:
        return None
    loads = list(dict.fromkeys(d["load"] for d in mine))
    unit = unit_of(analysis)
    outcomes = [(load, *load_outcome([d for d in mine if d["load"] == load])) for load in sorted(loads)]
    return "; ".join(_grouped(outcomes, unit))


def capacity_leader(analysis: dict) -> str:
    """Where the capacity search ran on several arms and one carries the most inside the SLO."""
    rows = [r for r in analysis.get("capacity") or [] if r.get("lower") is not None]
    if len(rows) < 2:
        return ""
    rows.sort(key=lambda r: r["lower"], reverse=True)
    if rows[0]["lower"] == rows[1]["lower"]:
        return ""
    rest = " and ".join(f"{r['lower']:g}" for r in rows[1:])
    return f"; inside the SLO {rows[0]['arm']} carries the most load ({rows[0]['lower']:g} against {rest})"


def offered_note(analysis: dict) -> str:
    """Where an open loop's seeded schedules strayed from the rates named (beyond SCHEDULE_STRAY),
    the rates they sent: a load reads at what the engine was offered."""
    sent: dict[float, list[float]] = {}
    for p in analysis.get("points") or []:
        if p.get("rate") and p.get("scheduled_rate_rps"):
            sent.setdefault(p["rate"], []).append(p["scheduled_rate_rps"])
    off = [(rate, rates_sent(xs)) for rate, xs in sorted(sent.items()) if any(strayed(rate, x) for x in xs)]
    if not off:
        return ""
    spans = [f"{rate:g} as {rate_span(xs)}" for rate, xs in off]
    return f" The seeded schedules sent {', '.join(spans)} req/s."


def which_arm(analysis: dict) -> str:
    """Which arm to run and by how much on the primary figure, at which loads, or why none."""
    clauses = leads(analysis)
    kept_out = not_ranked(analysis)
    if clauses is None:
        why = "; ".join(kept_out) if kept_out else "; ".join((analysis.get("verdict") or ["nothing was compared"])[:1])
        return f"None can be named from this run: {why}; fewer than two accepted, comparable arms were compared."
    figure = COMPARED_BY_NAME[primary_of(analysis)].label
    out = f" Not ranked: {', '.join(kept_out)}." if kept_out else ""
    return (f"On {figure}, the preregistered primary figure: run {clauses}{capacity_leader(analysis)}."
            f"{offered_note(analysis)}{out}")


# --- how sure -------------------------------------------------------------------------------------

def round_minutes(manifest: dict) -> list[float]:
    """Each recorded round's minutes, from the manifest's round log (the first includes sizing
    and canaries)."""
    rounds = ((manifest.get("repetitions") or {}).get("rounds")) or []
    return [round((r["finished_unix"] - r["started_unix"]) / 60, 1) for r in rounds
            if r.get("finished_unix") is not None and r.get("started_unix") is not None]


def minutes_per_extra_round(minutes: list[float]) -> float | None:
    """What one more round costs: the mean of the rounds after the first (sweeps only), else the first."""
    later = minutes[1:] or minutes
    return sum(later) / len(later) if later else None


def rounds_to_decide_it(d: dict, min_effect: float) -> int | None:
    """At the decision's estimate and spread, the further rounds that would decide it."""
    if d.get("lo") is None or not d.get("degrees_of_freedom"):
        return None
    step = df_per_round(str(d.get("method", "")).startswith("paired"), d.get("pooled_loads") or 1)
    return rounds_to_decide(d["lo"], d["hi"], min_effect, d["confidence"], d["degrees_of_freedom"],
                            min(d["repetitions_a"], d["repetitions_b"]) or 1, step)


def more_rounds_words(d: dict, min_effect: float, per_round: float | None) -> str:
    if d.get("lo") is None:
        return f"at least 1 more round ({NO_SPREAD})"
    more = rounds_to_decide_it(d, min_effect)
    if more is None:
        return f"more than {MOST_ROUNDS} more rounds at this estimate (it sits near the margin's edge)"
    minutes = f", about {more * per_round:.0f} min" if per_round else ""
    return f"about {more} more round{'' if more == 1 else 's'}{minutes}"


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _dof_words(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    span = f"{lo:g}" if lo == hi else f"{lo:g} to {hi:g}"
    return f"{span} degree{'' if hi == 1 else 's'} of freedom"


def how_sure(facts: RunFacts) -> str:
    """Rounds, degrees of freedom, the weak decisions, and what would decide the undecided ones."""
    a, m = facts.analysis, facts.manifest
    reps = m.get("repetitions") or {}
    minutes = round_minutes(m)
    ran = reps.get("ran") or max((r.get("repetitions") or 0 for r in a.get("load_table") or []), default=0)
    took = (f"each took {_listed([f'{x:g}' for x in minutes])} min" if minutes
            else "a round's duration is not recorded in the manifest")
    stopped = f"; stopped {reps['stopped']}" if reps.get("stopped") else ""
    watched = (f"; the stopping rule watched {COMPARED_BY_NAME.get(primary_of(a)).label} only"
               if reps.get("max", 0) > reps.get("min", 0) and primary_of(a) in COMPARED_BY_NAME else "")
    head = f"{ran} round{'' if ran == 1 else 's'} of every arm ({took}{stopped}{watched})"
    decisions = [d for d in a.get("decisions") or [] if d.get("metric") in COMPARED_BY_NAME]
    if not decisions:
        return f"{head}; nothing was compared, so no interval to weigh."
    primary = [d for d in decisions if d["metric"] == primary_of(a)] or decisions
    dofs = [d["degrees_of_freedom"] for d in primary if d.get("degrees_of_freedom") is not None]
    conf = confidence_text(primary[0].get("confidence") or 0.95)
    rest = f"; the {COMPARED_BY_NAME[primary[0]['metric']].label} decisions rest on " + (
        _dof_words(dofs) if dofs else "degrees of freedom not recorded") + f" ({conf} intervals)"
    decided = [d for d in decisions if d["decision"] != UNDECIDED]
    weak = [d for d in decided if weak_words(d)]
    if weak:
        rest += f"; {len(weak)} of {len(decided)} decisions rest on fewer than two degrees of freedom: weak"
    undecided = sorted((d for d in decisions if d["decision"] == UNDECIDED), key=lambda d: d["metric"] != primary_of(a))
    if not undecided:
        return f"{head}{rest}; every comparison is decided."
    min_effect = (a.get("decision_rule") or {}).get("min_effect", 0.05)
    per_round, unit = minutes_per_extra_round(minutes), unit_of(a)
    if all(d.get("lo") is None for d in undecided):
        return (f"{head}{rest}; {len(undecided)} of {len(decisions)} comparisons undecided: {NO_SPREAD}, so at least "
                f"1 more round{f' (about {per_round:.0f} min)' if per_round else ''} before any can be decided.")
    pairs = len({(x["arm_a"], x["arm_b"]) for x in decisions})
    advice: dict[str, list[str]] = {}  # the same advice said once for every comparison it fits
    for d in undecided[:SHOWN_UNDECIDED]:
        who = "" if pairs == 1 else f" ({d['arm_a']} against {d['arm_b']})"
        advice.setdefault(more_rounds_words(d, min_effect, per_round), []).append(
            f"{COMPARED_BY_NAME[d['metric']].label} at {load_words(unit, d['load'])}{who}")
    named = [f"{_listed(names)}: {words}" for words, names in advice.items()]
    more = (f"; {len(undecided) - SHOWN_UNDECIDED} more in the decision table" if len(undecided) > SHOWN_UNDECIDED
            else "")
    return (f"{head}{rest}; {len(undecided)} of {len(decisions)} comparisons undecided, and what would decide them "
            f"at this estimate: {'; '.join(named)}{more}.")


# --- inside which SLO -----------------------------------------------------------------------------

def slo_words(slo: dict | None) -> str:
    """The SLO's bounds and attainment target as the campaign set them."""
    if not slo:
        return "no SLO set in the campaign"
    bounds = [f"{name} ≤ {slo[key]:g} ms"
              for key, name in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("e2e_ms", "E2E"))
              if slo.get(key) is not None]
    target = slo.get("attainment") or Slo.model_fields["attainment"].default  # a campaign written before it was set
    share = f"{target:.1%}".replace(".0%", "%")
    return f"{' and '.join(bounds) or 'no latency bound'} for at least {share} of requests"


UNDECIDED_SLO = re.compile(r"(?P<load>[\d.]+): (?P<met>\d+) of (?P<n>\d+) inside; (?P<need>[\d,]+) with no more "
                           r"outside would prove (?P<share>[\d.]+%)")


def _undecided_hint(text: str) -> str:
    found = list(UNDECIDED_SLO.finditer(text or ""))
    if not found:
        return ""
    first = found[0]
    return (f"; undecided at {', '.join(f['load'] for f in found)} ({first['met']} of {first['n']} inside; "
            f"{first['need']} with none outside would prove {first['share']})")


def searched_capacity(row: dict, unit: str) -> str:
    lower, upper = row.get("lower"), row.get("upper")
    rounds = f"the capacity search, {row.get('repetitions')} rounds"
    differ = "; the rounds differ" if not str(row.get("agreement", "")).startswith("all") else ""
    if lower is None:
        return f"{row['arm']}: no load proven inside ({rounds}; outside at {load_words(unit, upper)})"
    if upper is None:
        return f"{row['arm']}: at least {load_words(unit, lower)}, no load proven outside ({rounds})"
    return f"{row['arm']} carries {load_words(unit, lower)} and not {upper:g} ({rounds}{differ})"


def swept_capacity(row: dict, unit: str) -> str:
    arm, top = row["arm"], row.get("highest load tested")
    if row.get("label") != "accepted":
        return f"{arm}: not judged ({row.get('label')})"
    inside, outside = row.get("highest load proven inside (exact)"), row.get("lowest load proven outside (exact)")
    tested = f"the sweep tested up to {top:g}" if top is not None else "the sweep's top load not recorded"
    hint = _undecided_hint(row.get("undecided, and what would decide it", ""))
    if inside is not None:
        out = f", outside at {outside:g}" if outside is not None else ""
        return f"{arm} carries at least {load_words(unit, inside)}, the highest load proven inside ({tested}{out})"
    if outside is not None:
        return f"{arm}: no load proven inside ({tested}); proven outside from {outside:g}{hint}"
    return f"{arm}: no load proven inside or outside ({tested}{hint})"


def inside_slo(facts: RunFacts) -> str:
    """The SLO's bounds, then one capacity per arm: the search's interval where it ran, else the sweep's."""
    a = facts.analysis
    slo = (facts.campaign.get("protocol") or {}).get("slo")
    unit = unit_of(a)
    searched = {r["arm"]: r for r in a.get("capacity") or []}
    parts = [searched_capacity(searched[r["arm"]], unit) if r["arm"] in searched else swept_capacity(r, unit)
             for r in a.get("slo_capacity") or []]
    parts += [searched_capacity(r, unit) for n, r in searched.items()
              if n not in {x["arm"] for x in a.get("slo_capacity") or []}]
    bounds = slo_words(slo)
    bounds = bounds[0].upper() + bounds[1:]
    return f"{bounds}: {'; '.join(parts)}." if parts else f"{bounds}; no arm was measured against it."


# --- at what cost ---------------------------------------------------------------------------------

def cost_sentence(facts: RunFacts) -> str:
    """Cost per million output tokens with its price, formula and utilisation, or why there is none."""
    cost = facts.campaign.get("cost")
    if not cost:
        return "No prices set in the campaign (its cost: section), so no cost per token is stated."
    hour = cost["hardware_hour_usd"]
    rows = [r for r in facts.analysis.get("capacity") or [] if r.get("cost_per_m_output_tokens_usd")]
    managed = cost.get("managed_per_m_output_tokens_usd")
    beside = f"; a managed endpoint charges ${managed:g} per million beside it" if managed else ""
    source = f" (the campaign's prices: {cost.get('source')})" if cost.get("source") else ""
    if not rows:
        return (f"The campaign prices the hardware at ${hour:g} an hour{source}, but no capacity search ran, so no "
                f"load is proven to carry it and no cost per token is stated{beside}.")
    each = _listed([f"{r['arm']} ${r['cost_per_m_output_tokens_usd']:.2f}" for r in rows])
    rates = _listed([f"{r['output_tok_s_at_lower']:.1f}" for r in rows])
    return (f"Per million output tokens, {each}: ${hour:g} an hour ÷ (the output tokens per second at each arm's "
            f"proven capacity, {rates} tok/s, × 3,600) × 10⁶, assuming the hardware streams at that load every "
            f"second of the hour (100% utilisation){beside}{source}.")


def other_run_line(other: RunFacts) -> str:
    """Another run of the campaign in one line: where it ran and what it found."""
    return (f"{other.name} on {host_words(host_of(other.passports))}, {precision_words(other.passports)}: "
            f"{leads(other.analysis) or 'nothing ranked'}")


def answer(facts: RunFacts, others: list[RunFacts] = ()) -> list[Sentence]:
    """The five answers, in the order a reader asks them, and which routing policy where arms route."""
    said = [Sentence("Which arm", which_arm(facts.analysis)), Sentence("How sure", how_sure(facts)),
            Sentence("Inside which SLO", inside_slo(facts)), Sentence("At what cost", cost_sentence(facts)),
            Sentence("On which host", host_sentence(facts, [other_run_line(o) for o in others]))]
    primary = primary_of(facts.analysis)
    routed = policy_answer(facts.analysis, primary, COMPARED_BY_NAME[primary].label
                           if primary in COMPARED_BY_NAME else primary)
    return said[:1] + [Sentence("Which routing policy", routed)] + said[1:] if routed else said
