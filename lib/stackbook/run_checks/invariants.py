"""What every run's claims must satisfy, read from the stored files alone.

The audit's other checks rerun the code that wrote a run, so a rule that is wrong passes them
faithfully. These do not: each is a property any honest analysis has, checked on what the run
says, whichever code said it. A load proven outside the SLO has requests outside it; an arm and
its identical replica are not proven on opposite sides of the SLO at one load; an arm is not
proven inside at a load above one proven outside; each verdict sentence states the sample its
own decisions used; a throughput measured above its modelled bound is flagged; a passport's
workload is what was sent; a run recorded from uncommitted code says so.

Each check is a pure function of plain data returning the violations in words; `INVARIANTS`
names them, in the order the audit reports them."""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

INSIDE, OUTSIDE = "highest load proven inside (exact)", "lowest load proven outside (exact)"
ESTIMATE = "max load inside the SLO (estimate)"


@dataclass
class RunFacts:
    """What the invariants read: the stored analysis, each arm's passport and measured requests
    (plain dicts, as on disk), the replicas the campaign declared and the manifest."""
    analysis: dict
    replicas: dict[str, str] = field(default_factory=dict)          # replica -> the arm it copies
    passports: dict[str, dict] = field(default_factory=dict)
    requests: dict[str, list[dict]] = field(default_factory=dict)   # measured, latest attempts
    manifest: dict = field(default_factory=dict)


def _rows(facts: RunFacts, part: str) -> list[dict]:
    return facts.analysis.get(part) or []


def _load_row(facts: RunFacts, arm: str, load) -> dict | None:
    for row in _rows(facts, "load_table"):
        if row.get("arm") == arm and row.get("load") is not None and abs(float(row["load"]) - float(load)) < 1e-9:
            return row
    return None


def outside_has_exceedances(facts: RunFacts) -> list[str]:
    """A load called proven outside by the exact binomial claim has requests outside the SLO."""
    out = []
    for row in _rows(facts, "slo_capacity"):
        load = row.get(OUTSIDE)
        if load is None:
            continue
        at = _load_row(facts, row["arm"], load)
        if at and at.get("slo_met") is not None and at.get("requests") and at["slo_met"] >= at["requests"]:
            out.append(f"{row['arm']}: load {load:g} is called proven outside the SLO (exact), yet "
                       f"{at['slo_met']} of {at['requests']} requests met it")
    return out


def slo_monotone(facts: RunFacts) -> list[str]:
    """Per arm, no load proven (or estimated) inside lies above a load proven outside."""
    out = []
    for row in _rows(facts, "slo_capacity"):
        outside = row.get(OUTSIDE)
        if outside is None:
            continue
        for col in (INSIDE, ESTIMATE):
            inside = row.get(col)
            if inside is not None and float(inside) > float(outside):
                out.append(f"{row['arm']}: {col} is {inside:g}, above the load proven outside ({outside:g})")
    return out


def replicas_agree(facts: RunFacts) -> list[str]:
    """An arm and its replica are not proven on opposite sides of the SLO at one load."""
    by_arm = {row["arm"]: row for row in _rows(facts, "slo_capacity")}
    out = []
    for replica, original in facts.replicas.items():
        a, b = by_arm.get(original), by_arm.get(replica)
        if not a or not b:
            continue
        for x, y, nx, ny in ((a, b, original, replica), (b, a, replica, original)):
            outside = y.get(OUTSIDE)
            for col, said in ((INSIDE, "proven inside the SLO"), (ESTIMATE, "inside the SLO by its estimate")):
                inside = x.get(col)
                if inside is not None and outside is not None and float(outside) <= float(inside):
                    out.append(f"{nx} is {said} at {inside:g} and its identical replica {ny} proven outside at "
                               f"{outside:g}")
                    break
    return out


SENTENCE = re.compile(r"^At .*?, (\S+) against (\S+) \((.*?), [\d.]+% intervals\): ")
SAMPLE = re.compile(r"(\d+) and (\d+) repetitions, (\d+) and (\d+) requests")


def sentence_samples(facts: RunFacts) -> list[str]:
    """Each verdict sentence states the repetitions and requests its own pair's decisions used."""
    decisions = _rows(facts, "decisions")
    out = []
    for line in facts.analysis.get("verdict") or []:
        m = SENTENCE.match(line)
        if not m:
            continue
        a, b = m.group(1), m.group(2)
        stated = {tuple(map(int, s)) for s in SAMPLE.findall(m.group(3))}
        loads = [d for d in decisions if (d["arm_a"], d["arm_b"]) == (a, b)]
        used = {(d["repetitions_a"], d["repetitions_b"], d["requests_a"], d["requests_b"]) for d in loads
                if _names_load(line, d["load"])}
        if used and stated != used:
            out.append(f"'{line[:90]}...' states {sorted(stated)}; its decisions used {sorted(used)}")
    return out


def _names_load(line: str, load: float) -> bool:
    """Whether the sentence is about this load: the first number it states."""
    m = re.match(r"^At \D*?(\d+(?:\.\d+)?)", line)
    return m is not None and abs(float(m.group(1)) - float(load)) < 1e-9


def bounds_hold(facts: RunFacts) -> list[str]:
    """A throughput measured above its demand-map bound, beyond the bound's interval, is flagged."""
    out = []
    for arm, d in (facts.analysis.get("demand_maps") or {}).items():
        bound, measured = d.get("bound_rps"), d.get("measured_saturation_rps")
        if not bound or measured is None:
            continue
        share = d.get("bound_interval") or 0  # the bound's interval as a share of the bound
        if measured > bound * (1 + share) and not d.get("bound_exceeded"):
            out.append(f"{arm}: measured {measured:.3g} req/s above its bound {bound:.3g} × (1 ± "
                       f"{share:.2g}), unflagged")
    return out


def _support(dist: dict | None) -> tuple[float, float] | None:
    if not dist or "kind" not in dist:
        return None
    if dist["kind"] == "fixed":
        return dist["tokens"], dist["tokens"]
    if "min" in dist and "max" in dist:
        return dist["min"], dist["max"]
    return None


def passport_workload_sent(facts: RunFacts) -> list[str]:
    """A passport's stated prompt and reply lengths hold every measured workload request sent."""
    out = []
    for arm, passport in facts.passports.items():
        work = ((passport.get("protocol") or {}).get("workload") or {})
        if work.get("kind") != "synthetic":
            continue
        sent = [r for r in facts.requests.get(arm, []) if not r.get("sentinel")]
        checks = [("output_tokens", "output_tokens_requested", "replies")]
        if not work.get("conversation"):
            checks.append(("prompt_tokens", "prompt_tokens_client", "prompts"))
        for key, column, words in checks:
            support = _support(work.get(key))
            values = [r[column] for r in sent if r.get(column) is not None]
            if support is None or not values:
                continue
            off = [v for v in values if not support[0] <= v <= support[1]]
            if off:
                out.append(f"{arm}: the passport states {words} of {support[0]:g} to {support[1]:g} tokens; "
                           f"{len(off)} of {len(values)} measured requests carried {min(values)} to {max(values)}")
    return out


MARKS = ("recorded from uncommitted code", "+modified ")  # today's mark, and an older run's line


def committed_code(facts: RunFacts) -> list[str]:
    """A run recorded from uncommitted code says so in every passport; unmarked, nobody can tell
    that no commit rebuilds it."""
    harness = facts.manifest.get("harness") or {}
    if not harness.get("modified"):
        return []
    unmarked = [arm for arm, p in facts.passports.items()
                if not any(m in str((p.get("protocol") or {}).get("harness")) for m in MARKS)]
    if unmarked or not facts.passports:
        return [f"recorded from uncommitted code (commit {harness.get('commit')} with changes, diff sha256 "
                f"{harness.get('diff_sha256')}), and not marked so in the passports of "
                f"{', '.join(unmarked) or 'no arm'}"]
    return []


INVARIANTS: dict[str, Callable[[RunFacts], list[str]]] = {
    "a load proven outside has requests outside": outside_has_exceedances,
    "SLO claims monotone in the load": slo_monotone,
    "identical replicas agree": replicas_agree,
    "each sentence states its own sample": sentence_samples,
    "throughput within its bound, or flagged": bounds_hold,
    "the passport states what was sent": passport_workload_sent,
    "recorded from committed code, or marked": committed_code,
}


def violations(facts: RunFacts, names: Iterable[str] | None = None) -> dict[str, list[str]]:
    """Every named invariant's violations (an empty list where it holds)."""
    return {name: INVARIANTS[name](facts) for name in (names or INVARIANTS)}
