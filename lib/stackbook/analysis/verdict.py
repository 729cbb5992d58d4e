"""The campaign's verdict under the preregistered decision rule: per arm and load, every compared
figure with its interval and sample size; per load, each pair of arms decided figure by figure;
the Pareto frontier and the capacity inside the SLO, where points whose intervals overlap are
not ordered."""
from __future__ import annotations

from itertools import combinations

import pandas as pd

from stackbook.analysis.decision import (
    AHEAD,
    COMPARED_BY_NAME,
    METHODS,
    NO_DIFFERENCE,
    Compared,
    PairDecision,
    confidence_text,
    decide,
    paired_intervals,
    welch_intervals,
    with_provenance,
    look_confidence,
    min_sample,
    supported,
)
from stackbook.analysis.pairing import pairable_rounds, rounds_left_out
from stackbook.evidence.label import Label
from stackbook.measure.metric_definitions import figure
from stackbook.measure.slo_bounds import PROVEN, REFUTED, UNDECIDED, AttainmentClaim, attainment_claim
from stackbook.measure.validity import offered_words, sent_label
from stackbook.analysis.per_load import (  # noqa: F401 - the notebooks read the per-load table through verdict
    SHOWN, _cells, display_table, figure_text, load_table, per_repetition_requests)


def rankable(df: pd.DataFrame) -> pd.DataFrame:
    """The points that may enter the frontier, the SLO capacity and the verdict: accepted arms,
    points no preregistered rule discarded. Tables and figures show the rest, marked."""
    if df.empty:
        return df
    keep = df["label"] == Label.ACCEPTED.value
    if "discarded" in df:
        keep &= ~df["discarded"].fillna(False).astype(bool)
    return df[keep]


def verdict_confidence(protocol) -> float:
    """The level of every interval the verdict reads: the rule's confidence, adjusted for the
    looks sequential stopping may take."""
    return look_confidence(protocol.decision.confidence, protocol.repetitions.looks)


def compared_figures(protocol) -> list[Compared]:
    return [COMPARED_BY_NAME[m] for m in protocol.decision.metrics]


def decisions(df: pd.DataFrame, protocol, comparable: set[str]) -> list[PairDecision]:
    """Every pair of ranked, comparable arms at every load, on every compared figure the sample
    supports (a percentile whose repetitions have too few requests is not compared). The pair's
    run-to-run spread is pooled over the loads both arms ranked; paired by round where every such
    load has rounds to pair (`pairable_rounds`), else Welch."""
    ranked = rankable(df)
    ranked = ranked[ranked["arm"].isin(comparable)]
    conf, margin = verdict_confidence(protocol), protocol.decision.min_effect
    cells = _cells(ranked)
    order = list(dict.fromkeys(df["arm"]))
    out = []
    for a, b in combinations(order, 2):
        loads = sorted(load for arm, load in cells if arm == a and (b, load) in cells)
        if not loads:
            continue
        rounds = {ld: pairable_rounds(cells[(a, ld)], cells[(b, ld)]) for ld in loads}
        paired = all(r is not None for r in rounds.values())
        kept = {ld: ((cells[(a, ld)], cells[(b, ld)]) if not paired else
                     (cells[(a, ld)][cells[(a, ld)]["repetition"].isin(rounds[ld])],
                      cells[(b, ld)][cells[(b, ld)]["repetition"].isin(rounds[ld])])) for ld in loads}
        for c in compared_figures(protocol):
            usable = [ld for ld in loads if c.column in kept[ld][0] and
                      all(supported(c.percentile, k) for k in per_repetition_requests(kept[ld][0])
                          + per_repetition_requests(kept[ld][1]))]
            pairs = {ld: (list(kept[ld][0][c.column]), list(kept[ld][1][c.column])) for ld in usable}
            intervals = (paired_intervals if paired else welch_intervals)(pairs, conf)
            for ld in usable:
                ga, gb = kept[ld]
                method = METHODS[paired] + (rounds_left_out(cells[(a, ld)], cells[(b, ld)], rounds[ld], a, b)
                                            if paired else "")
                out.append(with_provenance(decide(ld, c, a, b, intervals[ld], (len(ga), len(gb)),
                                  (sum(per_repetition_requests(ga)), sum(per_repetition_requests(gb))),
                                  margin, conf, method), pairs, paired, conf, margin))
    return sorted(out, key=lambda d: (d.load, order.index(d.arm_a), order.index(d.arm_b)))


def primary_decided(found: list[PairDecision], primary: str) -> bool:
    """Whether every comparison on the preregistered primary figure is decided (ahead or no
    difference): sequential stopping's condition."""
    on_primary = [d for d in found if d.metric == primary]
    return bool(on_primary) and all(d.decision in (AHEAD, NO_DIFFERENCE) for d in on_primary)


def unsupported_note(df: pd.DataFrame, protocol) -> str | None:
    """The compared percentiles the sample does not support, said once."""
    ranked = rankable(df)
    if ranked.empty:
        return None
    fewest = int(ranked["completed"].min())
    left = [c for c in compared_figures(protocol) if c.percentile and not supported(c.percentile, fewest)]
    if not left:
        return None
    return ("Not compared: " + ", ".join(f"{c.label} (needs at least {min_sample(c.percentile)} requests per "
                                         "repetition)" for c in left)
            + f"; the smallest repetition here has {fewest}, too few to estimate it, so the table shows its "
              "interpolated value marked as such and the verdict leaves it out.")


def load_words(df: pd.DataFrame, unit: str, load: float, arms: tuple[str, str]) -> str:
    """A load as the verdict names it: a concurrency, or an offered rate with the rates its
    schedules offered to the pair's ranked points (measure.validity.offered_words)."""
    if unit != "offered rate" or "scheduled_rate_rps" not in df:
        return f"{unit} {load:g}"
    ranked = rankable(df)
    at = ranked[(ranked["load"] == load) & ranked["arm"].isin(arms)]
    return offered_words(load, list(at["scheduled_rate_rps"]))


def sample_words(own: list[PairDecision]) -> str:
    """The sample a pair's decisions at one load used, from those decisions themselves: one
    phrase where every figure used the same repetitions, else each figure's own (a percentile a
    repetition cannot support is decided on fewer)."""
    def said(d: PairDecision) -> str:
        return (f"{d.repetitions_a} and {d.repetitions_b} repetitions, {d.requests_a} and {d.requests_b} requests")
    samples = list(dict.fromkeys(said(d) for d in own))
    if len(samples) == 1:
        return samples[0]
    return "; ".join(f"{COMPARED_BY_NAME[d.metric].label} on {said(d)}" for d in own)


def verdict_lines(df: pd.DataFrame, found: list[PairDecision], protocol, unit: str) -> list[str]:
    """Per load: every pairwise decision in words, with its interval and sample."""
    lines = []
    conf = verdict_confidence(protocol)
    by_load: dict[float, list[PairDecision]] = {}
    for d in found:
        by_load.setdefault(d.load, []).append(d)
    for load, ds in sorted(by_load.items()):
        for (a, b) in dict.fromkeys((d.arm_a, d.arm_b) for d in ds):
            own = [d for d in ds if (d.arm_a, d.arm_b) == (a, b)]
            lines.append(f"At {load_words(df, unit, load, (a, b))}, {a} against {b} ({sample_words(own)}, "
                         f"{confidence_text(conf)} intervals): {' '.join(d.text for d in own)}")
    note = unsupported_note(df, protocol)
    if note:
        lines.append(note)
    return lines


def tail_figure(table: pd.DataFrame) -> Compared:
    """The latency axis of the frontier: E2E p99 where every repetition supports it, else E2E p50."""
    p99 = figure("e2e_ms", "p99")
    if not table.empty and table[f"{p99.name}_supported"].all():
        return p99
    return figure("e2e_ms", "p50")


def pareto_frontier(table: pd.DataFrame) -> pd.DataFrame:
    """Ranked arm-load points that no other point beats decidedly on both throughput (higher)
    and latency (lower): beating means the two intervals do not overlap. With one repetition
    there are no intervals, so nothing is ordered and every point stays on the frontier."""
    pts = table[table["status"] == "accepted"] if not table.empty else table
    if pts.empty:
        return pd.DataFrame()
    lat = tail_figure(pts).name
    tp = "output_throughput"
    keep = []
    for i, p in pts.iterrows():
        dominated = False
        for j, q in pts.iterrows():
            if i == j or pd.isna(q[f"{tp}_lo"]) or pd.isna(p[f"{tp}_hi"]):
                continue
            if q[f"{tp}_lo"] > p[f"{tp}_hi"] and q[f"{lat}_hi"] < p[f"{lat}_lo"]:
                dominated = True
                break
        if not dominated:
            keep.append(i)
    cols = ["arm", "load", tp, f"{tp}_lo", f"{tp}_hi", lat, f"{lat}_lo", f"{lat}_hi", "repetitions", "requests"]
    return pts.loc[keep, cols].sort_values(tp).reset_index(drop=True)


def slo_claims(ranked: pd.DataFrame, attainment: float, confidence: float) -> list[tuple[float, AttainmentClaim]]:
    """Each ranked load's exact binomial verdict on "at least `attainment` of requests inside the
    SLO", from its pooled requests: proven, refuted or undecided, with what would decide it. The
    claim is the binomial test's alone, whatever the queue did: `slo_capacity` states a load whose
    queue grew beside it, in its own words."""
    out = []
    for _, row in ranked.iterrows():
        if not row.get("requests") or pd.isna(row.get("slo_met")):
            continue
        out.append((row["load"], attainment_claim(int(row["slo_met"]), int(row["requests"]), attainment, confidence)))
    return out


def _load(x) -> int | float:
    """A load as the campaign wrote it: a concurrency is a whole number."""
    return int(x) if float(x).is_integer() else float(x)


def attainment_share(target: float) -> str:
    return f"{target:.1%}".replace(".0%", "%")


def undecided_text(claims: list[tuple[float, AttainmentClaim]]) -> str:
    """The loads the sample could not decide, each with the requests that would decide it."""
    out = []
    for load, c in claims:
        if c.verdict == UNDECIDED:
            out.append(f"{load:g}: {c.met} of {c.requests} inside; {c.requests + c.more_to_prove:,} with no more "
                       f"outside would prove {attainment_share(c.target)} ({c.more_to_prove:,} more)")
    return "; ".join(out)


def slo_capacity(table: pd.DataFrame, attainment: float, confidence: float = 0.95) -> pd.DataFrame:
    """Per arm: the highest load whose SLO attainment is inside the target with its whole interval
    (decided), and the highest whose estimate reaches it (not yet decided when the two differ).
    Beside them, the exact binomial claim of each load's pooled requests: the highest load proven
    inside and the lowest proven outside bound the capacity, and every load left undecided
    says how many requests would decide it. An open-loop load whose queue grew while it was
    measured (measure.steady_state) is outside whatever its share, since a longer run reads it
    worse; that claim is not binomial, so it has its own column, in words, and the binomial
    columns keep their own verdicts. A queue that grows at one offered rate grows at every higher
    one, so no load from the lowest over-saturated one up counts inside by any column."""
    rows = []
    for arm, g in table.groupby("arm", sort=False):
        ranked = g[g["status"] == "accepted"].sort_values("load")
        grew = ranked["queue_grew"].eq(True) if "queue_grew" in ranked else pd.Series(False, index=ranked.index)
        ceiling = ranked.loc[grew, "load"].min() if grew.any() else None
        below = ranked if ceiling is None else ranked[ranked["load"] < ceiling]
        inside = below[below["slo_attainment_lo"] >= attainment]
        estimate = below[below["slo_attainment"] >= attainment]
        best = inside.iloc[-1] if len(inside) else None
        claims = slo_claims(ranked, attainment, confidence)
        proven = [ld for ld, c in claims if c.verdict == PROVEN and (ceiling is None or ld < ceiling)]
        refuted = [ld for ld, c in claims if c.verdict == REFUTED]
        open_claims = [(ld, c) for ld, c in claims if ceiling is None or ld < ceiling]
        over = {} if "queue_grew" not in ranked else {
            "over-saturated (queue grew)": ", ".join(f"{ld:g}" for ld in ranked.loc[grew, "load"]),
            OVER_SATURATED: over_saturation_text(ranked, grew, dict(claims))}
        rows.append({"arm": arm, "label": g["label"].iloc[0],
                     "max load inside the SLO (interval)": best["load"] if best is not None else None,
                     "max load inside the SLO (estimate)": estimate["load"].max() if len(estimate) else None,
                     "highest load proven inside (exact)": _load(max(proven)) if proven else None,
                     "lowest load proven outside (exact)": _load(min(refuted)) if refuted else None,
                     "undecided, and what would decide it": undecided_text(open_claims), **over,
                     "goodput there (req/s)": round(best["goodput_rps"], 3) if best is not None else None,
                     "highest load tested": g["load"].max(),
                     **sent_column(g),
                     "requests per load": int(g["requests"].max()),
                     "points left out": ", ".join(f"{ld:g} ({st})" for ld, st in zip(g["load"], g["status"])
                                                  if st != "accepted")})
    return pd.DataFrame(rows).set_index("arm") if rows else pd.DataFrame()


def sent_column(g: pd.DataFrame) -> dict:
    """An open loop's loads as the seeded schedules sent them, where any strayed from the rate named."""
    if "scheduled_rate_rps" not in g or "rate" not in g or not g["rate"].notna().any():
        return {}
    labels = [sent_label(r, list(g.loc[g["load"] == r, "scheduled_rate_rps"])) for r in sorted(g["load"].unique())]
    return {"rates as sent (req/s)": ", ".join(labels)} if any("sent" in x for x in labels) else {}


OVER_SATURATED = "outside by its growing queue (not binomial)"
BINOMIAL_WORDS = {PROVEN: "the binomial claim alone would prove it inside",
                  REFUTED: "the binomial claim refutes it too", UNDECIDED: "the binomial claim alone is undecided"}


def over_saturation_text(ranked: pd.DataFrame, grew: pd.Series, claims: dict) -> str:
    """Each over-saturated load in words, with its own binomial count beside it, and any load above
    the lowest of them that read steady yet is not counted inside."""
    out = []
    for _, row in ranked[grew].iterrows():
        c = claims.get(row["load"])
        count = f"; {c.met} of {c.requests} requests met the SLO, {BINOMIAL_WORDS[c.verdict]}" if c else ""
        out.append(f"{row['load']:g}: outside, its queue grew while it was measured (over-saturated){count}")
    if out:
        lowest = ranked.loc[grew, "load"].min()
        above = ranked.loc[~grew & (ranked["load"] > lowest), "load"]
        if len(above):
            out.append(f"{', '.join(f'{ld:g}' for ld in above)} above it read steady, yet "
                       f"{'is' if len(above) == 1 else 'are'} not counted inside: a queue that grows at one "
                       "offered rate grows at every higher one")
    return "; ".join(out)


def aa_control_lines(found: list[PairDecision], replicas: dict[str, str]) -> list[str]:
    """For each A/A pair (an arm and its replica): the rule must rank nothing between them. A
    ranking there says the intervals understate the noise, and the line says so."""
    lines = []
    for replica, original in replicas.items():
        pair = [d for d in found if {d.arm_a, d.arm_b} == {replica, original}]
        if not pair:
            lines.append(f"A/A control {replica} (a replica of {original}): not compared (no ranked points in common).")
            continue
        ranked = [d for d in pair if d.decision == AHEAD]
        same = sum(d.decision == NO_DIFFERENCE for d in pair)
        if ranked:
            lines.append(f"A/A control FAILED: {replica} and {original} run the same engine and settings, yet the rule "
                         f"ranked them in {len(ranked)} of {len(pair)} comparison(s) ("
                         + "; ".join(f"at load {d.load:g}: {d.text}" for d in ranked)
                         + "): the intervals understate this machine's noise; add repetitions or widen min_effect.")
        else:
            lines.append(f"A/A control {replica} (a replica of {original}): nothing ranked between the two; no "
                         f"difference in {same} of {len(pair)} comparison(s), the rest undecided.")
    return lines


def rule_text(rule: dict, protocol) -> str:
    """The preregistered rule and the sample it was applied to, in one paragraph."""
    plan = protocol.repetitions
    looks = rule.get("looks", 1)
    return (f"**Decision rule** (preregistered in the campaign): a difference counts when its whole "
            f"{confidence_text(rule['interval_confidence'])} interval lies beyond ±{rule['min_effect']:.0%}; "
            f"inside ±{rule['min_effect']:.0%} it is no difference; otherwise undecided. "
            + (f"Sequential stopping: {plan.min} to {plan.most} repetitions, stopping once every comparison on "
               f"{rule['primary']} is decided; {confidence_text(rule['confidence'])} over {looks} looks gives "
               f"{confidence_text(rule['interval_confidence'])} per look (Bonferroni). "
               if looks > 1 else f"Repetitions: {plan.min}, fixed. ")
            + f"Intervals: {rule.get('interval', 'not recorded')}.")


def decisions_table(rows: list[dict]) -> pd.DataFrame:
    """The pairwise decisions as a table: load, figure, pair, decision, leader, ratio [interval]."""
    out = []
    for d in rows:
        figure = COMPARED_BY_NAME[d["metric"]]
        ratio = (f"{d['ratio']:.3f}" + (f" [{d['lo']:.3f}, {d['hi']:.3f}]" if d.get("lo") is not None else "")
                 if d.get("ratio") is not None else "-")
        out.append({"load": d["load"], "figure": f"{figure.label} ({figure.unit})", "arms (a / b)":
                    f"{d['arm_a']} / {d['arm_b']}", "decision": d["decision"], "leader": d["leader"] or "-",
                    "ratio a/b [interval]": ratio, "repetitions": f"{d['repetitions_a']} / {d['repetitions_b']}",
                    "requests": f"{d['requests_a']} / {d['requests_b']}"})
    return pd.DataFrame(out)
