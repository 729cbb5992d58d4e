"""`stackbook audit RUN_DIR`: a run re-checked from its raw records.

Six checks, each said to apply or not (a run made by an older version may lack what one needs):
  files      every file the manifest hashed when the run was sealed is there and unchanged;
  points     each point's figures in results.json, recomputed from requests.jsonl (latest attempts);
  analysis   analysis.json, recomputed from the arms' records by the current analysis (the verdict's
             sentences, the decisions and their intervals, the tables);
  claims     each sentence's words against its own stored numbers: decisions (the rule applied
             again), capacity sentences (from their interval) and prediction errors;
  passports  each arm's passport.json, rebuilt from its results, engine record and the manifest;
  invariants what any honest analysis satisfies, read from the stored files whichever code wrote
             them (run_checks/invariants.py): each broken one named.
Every disagreement names the file, the field, the stored and the recomputed value. A field only
one side has (written by an older or a newer version) is listed apart, not compared.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from stackbook.analysis.capacity_summary import capacity_sentence
from stackbook.analysis.comparison import analyse_run, controls
from stackbook.analysis.decision import COMPARED_BY_NAME, decide
from stackbook.analysis.rounds_needed import df_per_round
from stackbook.capacity.predictions import interval_error
from stackbook.config.loading import load_campaign
from stackbook.evidence.files import file_sha256, model_json, read_json
from stackbook.evidence.rundir import RunDir
from stackbook.loadgen.phases import Phase
from stackbook.loadgen.records import read_records
from stackbook.measure.metric_definitions import columns
from stackbook.measure.metrics import LOAD_CHECK_COUNTS, WORKLOAD_THROUGHPUT, point_summary, sentinels_counted_apart
from stackbook.run_checks.invariants import RunFacts, violations
from stackbook.run_checks.passport import build_passport

POINT_FIGURES = ("completed", "requests",
                 *columns(("ttft_ms", "p50", "p99"), ("tpot_ms", "p50"), ("e2e_ms", "p50", "p99")),
                 "output_throughput_tok_s", "achieved_rate_rps", "scheduled_rate_rps", "slo_attainment")
# The load check's figures, compared where the run states it counted the requests as this version does.
LOAD_FIGURES = ("in_flight_mean", "littles_law_concurrency")
ANALYSIS_PARTS = ("verdict", "decisions", "load_table", "fairness", "slo_capacity", "pareto_frontier", "capacity",
                  "tails", "tail_verdict")


@dataclass(frozen=True)
class Disagreement:
    file: str
    field: str
    stored: object
    recomputed: object

    def text(self) -> str:
        def short(v) -> str:
            s = json.dumps(v, default=str)
            return s if len(s) <= 160 else s[:157] + "..."
        return f"{self.file}: {self.field}: stored {short(self.stored)}, recomputed {short(self.recomputed)}"


@dataclass
class Audit:
    run: str
    checks: dict[str, str] = field(default_factory=dict)   # check -> what it covered, or why it did not apply
    disagreements: list[Disagreement] = field(default_factory=list)
    broken: dict[str, list[str]] = field(default_factory=dict)  # invariant -> its violations in words
    one_sided: list[str] = field(default_factory=list)  # "file: field (only in the record|only recomputed)"

    def problems(self) -> list[str]:
        """Every disagreement and every broken invariant, one line each."""
        return [d.text() for d in self.disagreements] + [
            f"invariant broken ({name}): {v}" for name, found in self.broken.items() for v in found]

    @property
    def consistent(self) -> bool:
        return not self.disagreements and not any(self.broken.values())


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def _diff(file: str, path: str, stored, again, audit: Audit) -> None:
    """Every leaf where two JSON values part, by dotted path; a key one side lacks is a field of
    another version (listed once per field name, not compared)."""
    if isinstance(stored, dict) and isinstance(again, dict):
        for k in sorted(set(stored) | set(again), key=str):
            where = f"{path}.{k}" if path else str(k)
            if (k in stored) != (k in again):
                side = "only in the record" if k in stored else "only recomputed (a field this version adds)"
                note = f"{file}: {_field_name(where)} ({side})"
                if note not in audit.one_sided:
                    audit.one_sided.append(note)
                continue
            _diff(file, where, stored[k], again[k], audit)
    elif isinstance(stored, list) and isinstance(again, list) and len(stored) == len(again):
        for i, (s, a) in enumerate(zip(stored, again)):
            _diff(file, f"{path}[{i}]", s, a, audit)
    elif not _same(stored, again):
        audit.disagreements.append(Disagreement(file, path, stored, again))


def _g4(v) -> str:
    """A figure to four significant digits; a missing one as "none"."""
    return "none" if v is None else f"{v:.4g}"


def _field_name(path: str) -> str:
    """load_table[3].left_out -> load_table[].left_out: one line per field, not per row."""
    import re
    return re.sub(r"\[\d+\]", "[]", path)


def check_files(run: RunDir, audit: Audit) -> None:
    hashed = (read_json(run.manifest, {}) or {}).get("outputs")
    if not hashed:
        audit.checks["files"] = "not applied: the manifest holds no file hashes (a run sealed by an older version)"
        return
    for rel, digest in sorted(hashed.items()):
        p = run.path / rel
        if not p.exists():
            audit.disagreements.append(Disagreement(rel, "file", digest, "missing"))
        elif file_sha256(p) != digest:
            audit.disagreements.append(Disagreement(rel, "sha256", digest, file_sha256(p)))
    audit.checks["files"] = f"{len(hashed)} files against the manifest's hashes"


def check_points(run: RunDir, campaign, audit: Audit) -> None:
    """Each point's figures recomputed from its records. The load check's figures are compared
    where the run states it counted as this version does; in a run recorded before that, they are
    recomputed too, and any that differ are listed apart (counted under the older definition)."""
    n, older, older_differ, with_sentinels = 0, 0, 0, 0
    for arm in campaign.arms:
        d = run.arm(arm.name)
        sweep = (read_json(d.results, {}) or {}).get("sweep") or {}
        if not sweep.get("points"):
            continue
        records = read_records(d.requests, latest_attempt=True) if d.requests.exists() else []
        slo = campaign.protocol_for(arm).slo
        same_load_check = sweep.get("load_check_counts") == LOAD_CHECK_COUNTS
        older += 0 if same_load_check else len(sweep["points"])
        file = str(d.results.relative_to(run.path))
        for name, point in sweep["points"].items():
            again = point_summary([r for r in records if r.point == name], slo)
            apart = sentinels_counted_apart(point)
            with_sentinels += 0 if apart else 1
            for key in POINT_FIGURES + LOAD_FIGURES:
                if key not in point or _same(point[key], again.get(key)):
                    continue
                if key in WORKLOAD_THROUGHPUT and not apart:
                    audit.one_sided.append(f"{file}: sweep.points.{name}.{key} (counted with the point's sentinels: "
                                           f"stored {_g4(point[key])}, the workload's alone {_g4(again.get(key))})")
                elif key in POINT_FIGURES or same_load_check:
                    audit.disagreements.append(Disagreement(file, f"sweep.points.{name}.{key}", point[key],
                                                            again.get(key)))
                else:
                    older_differ += 1
                    audit.one_sided.append(f"{file}: sweep.points.{name}.{key} (counted under the older load check: "
                                           f"stored {_g4(point[key])}, today's count {_g4(again.get(key))})")
            n += 1
    audit.checks["points"] = (f"{n} points' figures against requests.jsonl" + (
        f" ({older} of them recorded before results.json stated which requests the load check counts: their "
        f"load-check figures recomputed, {older_differ} differing under today's count, listed apart)"
        if older else "") + (
        f"; {with_sentinels} whose throughput counted their sentinels: recomputed over the workload alone, "
        "those differing listed apart" if with_sentinels else "")) if n else "not applied: no sweep points"


def check_analysis(run: RunDir, audit: Audit) -> None:
    stored = read_json(run.analysis)
    if stored is None:
        audit.checks["analysis"] = "not applied: the run has no analysis.json"
        return
    again = json.loads(analyse_run(run).model_dump_json())
    for part in ANALYSIS_PARTS:
        if part in stored:
            _diff("analysis.json", part, stored[part], again.get(part), audit)
    audit.checks["analysis"] = "analysis.json (" + ", ".join(p for p in ANALYSIS_PARTS if p in stored) + ")"


def check_claims(run: RunDir, campaign, audit: Audit) -> None:
    """Each sentence's words against its own stored numbers, so no word stands beside a number that
    contradicts it: a decision's rule applied again to its ratio, interval and margin must give the
    same decision, leader and sentence ('ahead', 'higher', 'no difference'); a capacity sentence
    must be the one its own interval and the search's SLO give; a prediction's error must be the
    one its predicted value and the measured interval give."""
    stored = read_json(run.analysis, {}) or {}
    counted = [f"{n} {what}" for n, what in ((_decision_claims(stored, campaign, audit), "decisions' words"),
                                             (_capacity_claims(run, stored, audit), "capacity sentences"),
                                             (_prediction_claims(stored, audit), "prediction errors")) if n]
    audit.checks["claims"] = (", ".join(counted) + " against their own numbers" if counted
                              else "not applied: the analysis holds no decisions, capacities or predictions")


def _claim_differs(audit: Audit, where: str, stored, again) -> None:
    if not _same(stored, again):
        audit.disagreements.append(Disagreement("analysis.json", f"{where} (against its own numbers)", stored, again))


def _decision_claims(stored: dict, campaign, audit: Audit) -> int:
    decisions = stored.get("decisions") or []
    margin = campaign.protocol.decision.min_effect
    for i, d in enumerate(decisions):
        again = decide(d["load"], COMPARED_BY_NAME[d["metric"]], d["arm_a"], d["arm_b"], (d["ratio"], d["lo"], d["hi"]),
                       (d["repetitions_a"], d["repetitions_b"]), (d["requests_a"], d["requests_b"]), margin,
                       d["confidence"], d["method"], d.get("degrees_of_freedom"),
                       df_per_round(d["method"].startswith("paired"), d.get("pooled_loads") or 1))
        for key in ("decision", "leader", "text"):
            _claim_differs(audit, f"decisions[{i}].{key}", d.get(key), getattr(again, key))
    return len(decisions)


def _capacity_claims(run: RunDir, stored: dict, audit: Audit) -> int:
    rows = stored.get("capacity") or []
    for i, row in enumerate(rows):
        search = ((read_json(run.arm(row["arm"]).results, {}) or {}).get("capacity") or {})
        if "slo" not in search:
            _claim_differs(audit, f"capacity[{i}].sentence", row.get("sentence"), "no capacity search in results.json")
            continue
        again = capacity_sentence(row["arm"], row.get("lower"), row.get("upper"), search["slo"], search["target"])
        _claim_differs(audit, f"capacity[{i}].sentence", row.get("sentence"), again)
    return len(rows)


def _prediction_claims(stored: dict, audit: Audit) -> int:
    rows = stored.get("capacity_predictions") or []
    for i, row in enumerate(rows):
        again = interval_error(row.get("predicted"), row.get("measured_lower"), row.get("measured_upper"))
        _claim_differs(audit, f"capacity_predictions[{i}].error", row.get("error"), again)
    return len(rows)


def check_passports(run: RunDir, campaign, audit: Audit) -> None:
    n = 0
    entries = (read_json(run.manifest, {}) or {}).get("arms", {})
    for arm in campaign.arms:
        d = run.arm(arm.name)
        stored = read_json(d.passport_json)
        if stored is None:
            continue
        died = (entries.get(arm.name) or {}).get("status") == "engine_died"
        again = model_json(build_passport(campaign, arm, d, engine_died=died))
        _diff(str(d.passport_json.relative_to(run.path)), "", stored, again, audit)
        n += 1
    audit.checks["passports"] = f"{n} passports rebuilt" if n else "not applied: no passports"


def check_invariants(run: RunDir, campaign, audit: Audit) -> None:
    """The named invariants on the run's analysis; identical replicas are the A/A ones (a replica
    behind the delay relay differs by construction)."""
    analysis = read_json(run.analysis)
    if analysis is None:
        audit.checks["invariants"] = "not applied: the run has no analysis.json"
        return
    facts = RunFacts(analysis, controls(campaign)[0],
                     manifest=read_json(run.manifest, {}) or {})
    for arm in campaign.arms:
        d = run.arm(arm.name)
        passport = read_json(d.passport_json)
        if passport is not None:
            facts.passports[arm.name] = passport
            facts.requests[arm.name] = [r.model_dump() for r in read_records(d.requests, latest_attempt=True)
                                        if r.phase == Phase.MEASURE]
    audit.broken = violations(facts)
    held = sum(not v for v in audit.broken.values())
    audit.checks["invariants"] = f"{held} of {len(audit.broken)} invariants hold"


def audit_run(path: str | Path) -> Audit:
    run = RunDir.existing(path)
    audit = Audit(str(path))
    check_files(run, audit)
    campaign = load_campaign(run.campaign_resolved)
    check_points(run, campaign, audit)
    check_analysis(run, audit)
    check_claims(run, campaign, audit)
    check_passports(run, campaign, audit)
    check_invariants(run, campaign, audit)
    return audit
