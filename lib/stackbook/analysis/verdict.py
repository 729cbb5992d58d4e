"""The campaign's verdict under the preregistered decision rule: per arm and load, every compared
figure with its interval and sample size; per load, each pair of arms decided figure by figure;
the Pareto frontier and the capacity inside the SLO, where points whose intervals overlap are
not ordered."""
from __future__ import annotations

from itertools import combinations

import pandas as pd
from scipy import stats

from stackbook.analysis.decision import (
    AHEAD,
    COMPARED,
    COMPARED_BY_NAME,
    METHODS,
    NO_DIFFERENCE,
    Compared,
    PairDecision,
    confidence_text,
    decide,
    figure_intervals,
    interval,
    paired_intervals,
    welch_intervals,
    with_provenance,
    look_confidence,
    min_sample,
    supported,
)
from stackbook.analysis.pairing import pairable_rounds, rounds_left_out
from stackbook.evidence.label import Label
from stackbook.measure.slo_bounds import PROVEN, REFUTED, UNDECIDED, AttainmentClaim, attainment_claim
from stackbook.measure.validity import offered_words

# Figures shown with an interval beside the compared ones (never ranked pairwise: a proportion
# bounded at 1 and a rate that may be 0 have no ratio to take).
SHOWN = (("goodput_rps", "goodput", "req/s"), ("slo_attainment", "SLO attainment", "share"))


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


def _cells(df: pd.DataFrame) -> dict[tuple[str, float], pd.DataFrame]:
    return {(arm, load): g.sort_values("repetition") if "repetition" in g else g
            for (arm, load), g in df.groupby(["arm", "load"], sort=False)}


def per_repetition_requests(g: pd.DataFrame) -> list[int]:
    return [int(x) for x in g["completed"].fillna(0)]


def _slo_interval(g: pd.DataFrame, confidence: float) -> tuple[float | None, float | None, float | None]:
    """SLO attainment with the wider of two intervals: the t-interval over repetitions and the
    Wilson interval of the pooled requests (several repetitions that all happen to read 1.0 still
    carry the binomial uncertainty of their few requests)."""
    per_rep = interval(list(g["slo_attainment"].dropna()), int(g["requests"].sum()), confidence)
    n = int(g["requests"].fillna(0).sum())
    if per_rep.estimate is None or n == 0:
        return None, None, None
    good = int(round((g["slo_attainment"] * g["requests"]).sum()))
    wilson = stats.binomtest(good, n).proportion_ci(confidence_level=confidence, method="wilson")
    lo = min(wilson.low, per_rep.lo) if per_rep.lo is not None else wilson.low
    hi = max(wilson.high, per_rep.hi) if per_rep.hi is not None else wilson.high
    return per_rep.estimate, max(0.0, lo), min(1.0, hi)


def load_table(df: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """One row per arm and load: repetitions, requests, and each figure's estimate with its
    interval (`<figure>`, `<figure>_lo`, `<figure>_hi`), from every point of that arm and load,
    ranked or not (the `status` column says which). A compared figure is the geometric mean of its
    repetitions with a multiplicative interval whose spread is the arm's, pooled over its ranked
    loads (see analysis.decision)."""
    cells = _cells(df)
    ranked_keys = {k for k, g in cells.items() if (g["status"] == Label.ACCEPTED.value).all()}
    pooled = {}
    for arm in dict.fromkeys(a for a, _ in cells):
        mine = {k: g for k, g in cells.items() if k[0] == arm}
        for c in COMPARED:
            if c.column not in df:
                continue
            values = {k: list(g[c.column].dropna()) for k, g in mine.items()}
            spread_from = {k: v for k, v in values.items() if k in ranked_keys} or values
            ranked_iv = figure_intervals(spread_from, confidence)
            rest = {k: v for k, v in values.items() if k not in spread_from}
            pooled[(arm, c.name)] = ranked_iv | _with_spread_of(rest, spread_from, confidence)
    rows = []
    for (arm, load), g in cells.items():
        n = per_repetition_requests(g)
        row = {"arm": arm, "label": g["label"].iloc[0], "load": load, "repetitions": len(g),
               "rate": g["rate"].iloc[0] if "rate" in g else None,  # an open loop's: its figures' axis says so
               "requests": sum(n), "requests_per_repetition": min(n) if n else 0,
               "status": ("accepted" if (arm, load) in ranked_keys else
                          "; ".join(sorted({s for s in g["status"] if s != Label.ACCEPTED.value})))}
        for c in COMPARED:
            est, lo, hi = pooled.get((arm, c.name), {}).get((arm, load), (None, None, None))
            row |= {c.name: est, f"{c.name}_lo": lo, f"{c.name}_hi": hi,
                    f"{c.name}_supported": all(supported(c.percentile, k) for k in n)}
        row["slo_met"] = int(round((g["slo_attainment"] * g["requests"]).sum())) if g["slo_attainment"].notna().all() \
            else None
        if "queue_grew" in g:  # runs measured before the steady-state check have no such column
            row["queue_grew"] = bool(g["queue_grew"].eq(True).any())
        for column, name, _ in SHOWN:
            if name == "SLO attainment":
                est, lo, hi = _slo_interval(g, confidence)
            else:
                iv = interval(list(g[column].dropna()) if column in g else [], sum(n), confidence)
                est, lo, hi = iv.estimate, (max(0.0, iv.lo) if iv.lo is not None else None), iv.hi
            row |= {column: est, f"{column}_lo": lo, f"{column}_hi": hi}
        rows.append(row)
    return pd.DataFrame(rows)


def _with_spread_of(cells: dict, spread_from: dict, confidence: float) -> dict:
    """Intervals for cells left out of the ranking, using the spread of the ranked ones."""
    out = {}
    for k, v in cells.items():
        both = figure_intervals({**spread_from, k: v}, confidence)
        out[k] = both[k]
    return out


def figure_text(row: pd.Series, c: Compared) -> str:
    """A compared figure in a table cell: the estimate and its interval; an unsupported percentile
    (a mean of repetitions' interpolated tails, not a maximum) says so, with its sample size."""
    est = row.get(c.name)
    if est is None or pd.isna(est):
        return "-"
    if c.percentile and not row.get(f"{c.name}_supported"):
        n, need = int(row["requests_per_repetition"]), min_sample(c.percentile)
        return f"n={n} < {need} a repetition: p{c.percentile} {est:,.0f} interpolated, not compared"
    lo, hi = row.get(f"{c.name}_lo"), row.get(f"{c.name}_hi")
    digits = 1 if c.unit == "tok/s" or est < 100 else 0
    if lo is None or pd.isna(lo):
        return f"{est:,.{digits}f} (no interval)"
    return f"{est:,.{digits}f} [{lo:,.{digits}f}, {hi:,.{digits}f}]"


def display_table(table: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """The load table as a reader reads it: one column per figure, `estimate [interval]`."""
    if table.empty:
        return table
    out = table[["arm", "load", "status", "repetitions", "requests"]].copy()
    ci = confidence_text(confidence)
    for c in COMPARED:
        head = c.label if not c.percentile else f"{c.label} (needs n ≥ {min_sample(c.percentile)} per repetition)"
        out[f"{head} {c.unit} [{ci} CI]"] = [figure_text(r, c) for _, r in table.iterrows()]
    for column, name, unit in SHOWN:
        out[f"{name} {unit} [{ci} CI]"] = [
            "-" if pd.isna(r[column]) else (f"{r[column]:.3f}" + ("" if pd.isna(r[f"{column}_lo"]) else
                                                                 f" [{r[f'{column}_lo']:.3f}, {r[f'{column}_hi']:.3f}]"))
            for _, r in table.iterrows()]
    return out.sort_values(["load", "arm"]).reset_index(drop=True)


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
                                  margin, conf, method), pairs, paired, conf))
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


def verdict_lines(df: pd.DataFrame, found: list[PairDecision], protocol, unit: str) -> list[str]:
    """Per load: every pairwise decision in words, with its interval and sample."""
    lines = []
    conf = verdict_confidence(protocol)
    by_load: dict[float, list[PairDecision]] = {}
    for d in found:
        by_load.setdefault(d.load, []).append(d)
    for load, ds in sorted(by_load.items()):
        first = ds[0]
        sample = (f"{first.repetitions_a} and {first.repetitions_b} repetitions, {first.requests_a} and "
                  f"{first.requests_b} requests")
        for (a, b) in dict.fromkeys((d.arm_a, d.arm_b) for d in ds):
            texts = " ".join(d.text for d in ds if (d.arm_a, d.arm_b) == (a, b))
            lines.append(f"At {load_words(df, unit, load, (a, b))}, {a} against {b} ({sample}, "
                         f"{confidence_text(conf)} intervals): {texts}")
    note = unsupported_note(df, protocol)
    if note:
        lines.append(note)
    return lines


def tail_figure(table: pd.DataFrame) -> Compared:
    """The latency axis of the frontier: E2E p99 where every repetition supports it, else E2E p50."""
    p99 = COMPARED_BY_NAME["e2e_p99"]
    if not table.empty and table["e2e_p99_supported"].all():
        return p99
    return COMPARED_BY_NAME["e2e_p50"]


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
    SLO", from its pooled requests: proven, refuted or undecided, with what would decide it."""
    out = []
    for _, row in ranked.iterrows():
        if not row.get("requests") or pd.isna(row.get("slo_met")):
            continue
        claim = attainment_claim(int(row["slo_met"]), int(row["requests"]), attainment, confidence)
        if row.get("queue_grew") is True:  # over-saturated: outside whatever its share (measure.steady_state)
            claim = claim._replace(verdict=REFUTED)
        out.append((row["load"], claim))
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
    says how many requests would decide it."""
    rows = []
    for arm, g in table.groupby("arm", sort=False):
        ranked = g[g["status"] == "accepted"].sort_values("load")
        steady = ranked[~ranked["queue_grew"].astype(bool)] if "queue_grew" in ranked else ranked
        inside = steady[steady["slo_attainment_lo"] >= attainment]
        estimate = steady[steady["slo_attainment"] >= attainment]
        best = inside.iloc[-1] if len(inside) else None
        claims = slo_claims(ranked, attainment, confidence)
        proven = [ld for ld, c in claims if c.verdict == PROVEN]
        refuted = [ld for ld, c in claims if c.verdict == REFUTED]
        grew = ranked.loc[ranked["queue_grew"].astype(bool), "load"] if "queue_grew" in ranked else None
        over = {"over-saturated (queue grew)": ", ".join(f"{ld:g}" for ld in grew)} if grew is not None else {}
        rows.append({"arm": arm, "label": g["label"].iloc[0],
                     "max load inside the SLO (interval)": best["load"] if best is not None else None,
                     "max load inside the SLO (estimate)": estimate["load"].max() if len(estimate) else None,
                     "highest load proven inside (exact)": _load(max(proven)) if proven else None,
                     "lowest load proven outside (exact)": _load(min(refuted)) if refuted else None,
                     "undecided, and what would decide it": undecided_text(claims), **over,
                     "goodput there (req/s)": round(best["goodput_rps"], 3) if best is not None else None,
                     "highest load tested": g["load"].max(),
                     "requests per load": int(g["requests"].max()),
                     "points left out": ", ".join(f"{ld:g} ({st})" for ld, st in zip(g["load"], g["status"])
                                                  if st != "accepted")})
    return pd.DataFrame(rows).set_index("arm") if rows else pd.DataFrame()


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
            lines.append(f"A/A control {replica} (a replica of {original}): nothing ranked between the two; no difference "
                         f"in {same} of {len(pair)} comparison(s), the rest undecided.")
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
