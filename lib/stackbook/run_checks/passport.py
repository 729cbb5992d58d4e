"""The four-part benchmark passport per arm: identity, protocol, validity, results.

A field not known says so, with the reason; nothing is left silently blank.
"""
from __future__ import annotations

import json
from typing import Any, Optional, Union

from pydantic import BaseModel

from stackbook.evidence.files import model_json, read_json, write_json_atomic
from stackbook.evidence.label import Label
from stackbook.evidence.results import (
    ArmResults,
    Discard,
    Number,
    Open,
    PointSummary,
    Unknown,
)
from stackbook.analysis.decision import min_sample, undersampled_text
from stackbook.config.precision import arm_precision
from stackbook.evidence.harness import describe as describe_revision
from stackbook.evidence.rundir import ArmDir, RunDir
from stackbook.run_checks.sent_workload import sent_words, sent_workload
from stackbook.host import host_identity, topology_line
from stackbook.measure.metric_definitions import columns
from stackbook.measure.reconciliation import arm_reconciliation
from stackbook.measure.validity import worded_discards

Known = Union[dict[str, Any], Unknown]


class Identity(Open):
    """Who served the arm, on what, in which formats."""
    arm: str
    model: Known
    engine: Known
    launch: Known
    host: dict[str, Any]
    formats: dict[str, str]
    speculative_decoder: str
    engine_build: Optional[Known] = None
    kernel_choice: Optional[Known] = None


class ProtocolPart(Open):
    """What every request of the arm followed."""
    workload: dict[str, Any]
    harness: str
    decoding: dict[str, Any]
    output_budget_tokens: Union[str, int]
    prompt_tokens: Union[str, int, None] = None
    arrival: dict[str, Any]
    prefix_cache: str
    warmup_requests_per_point: int
    cooldown_requests_per_point: Union[str, dict[str, int]]
    requests_per_point: int
    repetitions: Union[dict[str, Any], int]  # an int in runs recorded before repetitions were interleaved
    seeds: list[int]
    context_length: int
    slo: dict[str, Any]
    overrides: dict[str, Any]
    prompts_sent: Union[dict[str, Any], Unknown, None] = None  # per point: the digests of requests_sent.jsonl.gz
    precision: Union[dict[str, Any], Unknown, None] = None  # how the weights' and KV precision was chosen, and why


class Capacity(Open):
    configured: Known
    realized: Known
    predicted: Known


class Validity(Open):
    """Whether the numbers may be believed: canaries, capacity, discards, errors, load held."""
    canaries: Known
    gate: Optional[dict[str, Any]] = None
    capability_probe: Known
    capacity: Capacity
    discard_rules: dict[str, Any]
    discards: Union[list[Discard], Unknown]
    error_counts: Known
    failure_counts: Optional[Known] = None  # runs recorded before carry wrong_output_counts
    reconciliation: Optional[Known] = None  # client against the engine's histograms, with a verdict
    harness_ceiling: Optional[Known] = None  # the harness's own open-loop ceiling the sweep was judged against
    length_control: Known
    load_validity: Known
    prefix_cache: Optional[Known] = None
    gpu_telemetry: Optional[Known] = None
    engine_restarts: int


class MeasuredResults(Open):
    """The sweep ran: its label, every point, and where the raw records are."""
    label: Label
    points: dict[str, PointSummary]
    peak_engine_rss_gib: Union[Number, Unknown]
    energy: Known
    raw: dict[str, str]


class NotMeasured(BaseModel):
    """No sweep: the label still says why the arm is not ranked."""
    label: Label
    unknown: str


class Passport(Open):
    """passport.json: the four parts, validated before the file is written."""
    passport_version: int
    campaign: str
    identity: Identity
    protocol: ProtocolPart
    validity: Validity
    results: Union[MeasuredResults, NotMeasured, Unknown]


def unknown(reason: str) -> dict:
    return {"unknown": reason}


def run_record(arm_dir: ArmDir) -> dict:
    """The run's manifest, read for what the whole run shares: its harness revision, its rounds."""
    return read_json(RunDir(arm_dir.path.parent.parent).manifest, {}) or {}


def repetitions_part(protocol, arm_dir: ArmDir, sweep: dict | None, manifest: dict) -> dict:
    """The repetitions planned, how many ran and why they stopped, the order of every round, and
    how each repetition of this arm began."""
    plan = protocol.repetitions
    rounds = (manifest.get("repetitions") or {})
    began = {}
    for s in ((sweep or {}).get("points") or {}).values():
        if s.get("repetition") is not None and s.get("repetition_began"):
            began.setdefault(str(s["repetition"]), s["repetition_began"])
    return {"min": plan.min, "max": plan.most, "order": plan.order, "order_seed": plan.order_seed,
            "ran": rounds.get("ran", len(began) or None), "stopped": rounds.get("stopped", "not recorded"),
            "rounds": [{"round": x["round"], "order": x["order"]} for x in rounds.get("rounds", [])],
            "began": began or "not recorded"}


def prompts_sent(sweep: dict | None, arm_dir: ArmDir) -> dict:
    """Where the exact bodies are kept, and per point their digests: the prompts alone (equal
    across engines sent the same prompts) and the bodies as sent (what a replay re-sends)."""
    points = {name: {k: s[k] for k in ("requests_sent", "prompts_sha256", "bodies_sha256") if s.get(k)}
              for name, s in ((sweep or {}).get("points") or {}).items() if s.get("bodies_sha256")}
    if not points:
        return unknown("no request bodies were recorded (the load sweep did not run, or the run predates "
                       "requests_sent.jsonl.gz)")
    return {"file": arm_dir.requests_sent.name, "points": points}


def replayed_protocol(protocol, arm_dir: ArmDir, arrival: dict) -> dict:
    """A replayed trace's protocol fields from what was sent (the campaign's synthetic workload
    goes unused): the lengths its measured requests carried and the requests each point measured."""
    from stackbook.loadgen.records import read_records

    records = read_records(arm_dir.requests, latest_attempt=True) if arm_dir.requests.exists() else []
    workload = sent_workload(records, arrival)
    prompts, budget = sent_words(workload)
    return {"workload": workload, "prompt_tokens": prompts, "output_budget_tokens": budget,
            "requests_per_point": protocol.arrival.measured_at(protocol.arrival.load_levels()[0], protocol)}


def recorded_host(arm_dir) -> dict | None:
    """The host an arm whose engine never started recorded in its passport when it ran: that
    passport is its only record of the machine, so a rebuild elsewhere keeps it, not this one."""
    host = ((read_json(arm_dir.passport_json, {}) or {}).get("identity") or {}).get("host")
    return host if isinstance(host, dict) and host else None


def run_host(campaign) -> dict:
    """The host of an arm whose engine never started: this machine, measured, or for a sizing-only
    campaign on catalog hardware, what it was sized for (it did not run there)."""
    accelerator = campaign.hardware.accelerator
    if accelerator != "this-cpu":
        return {"sized_for": accelerator, "note": f"sized for {accelerator}, not run",
                "arithmetic_done_on": host_identity()}
    return host_identity()


def energy_of(gpu_telemetry: dict | None) -> dict:
    """Energy from the NVML power samples taken during the sweep, per GPU and in total."""
    gpus = (gpu_telemetry or {}).get("gpus") or {}
    per_gpu = {str(i): g["energy_j"] for i, g in gpus.items() if g.get("energy_j") is not None}
    if not per_gpu:
        why = (gpu_telemetry or {}).get("reason") or "no NVML power samples"
        return unknown(f"not measured: {why}")
    sources = sorted({g.get("energy_source") or "NVML power samples, trapezoid rule" for g in gpus.values()})
    return {"joules_total": round(sum(per_gpu.values()), 1), "joules_per_gpu": per_gpu,
            "source": f"{'; '.join(sources)} ({gpu_telemetry.get('samples')} samples)"}


def canary_validity(canaries: dict) -> dict:
    """The verdict, its reason and every check by name and kind with its outcome."""
    out = {k: canaries[k] for k in ("verdict", "reason", "suite", "suite_sha256", "gating_checks", "passed",
                                    "failed", "out_of_scope") if k in canaries}
    out["checks"] = {c["id"]: f"{c['kind']}: {c['outcome']}" for c in canaries.get("checks", [])} or {
        r["id"]: f"{r['kind']}: {'PASS' if r['passed'] else 'FAIL'}" for r in canaries.get("results", [])}
    return out


REQUEST_FAILURES = ("timeout", "transport", "http_error", "malformed_stream", "engine_died")


def failure_counts(canaries: dict | None, sweep: dict | None) -> dict:
    """Every failure counted by its cause, kept apart: the canaries' gating and out-of-scope
    checks, and the sweep's measured requests with their sentinels."""
    counts = (canaries or {}).get("counts")
    if counts and "gating" not in counts:  # a run recorded before: the gating counts alone
        counts = {"gating": counts, "out_of_scope": unknown("not counted by the version that recorded this run")}
    errors = (sweep or {}).get("error_counts") or {}
    under_load = {
        "admission_rejected": errors.get("admission_rejected", 0),
        "length_truncated_by_engine": errors.get("length_truncated_by_engine", unknown("not counted apart")),
        "length_truncated_by_budget": errors.get("length_truncated_by_budget", errors.get("length_truncated", 0)),
        "schema_or_tool_failure": errors.get("schema_failure", 0),
        "completed_but_wrong": errors.get("completed_but_wrong", 0),
        "request_failed": sum(errors.get(k, 0) for k in REQUEST_FAILURES),
        "sentinels": errors.get("sentinels") or unknown("no sentinels were mixed into the sweep")}
    return {"canaries": counts or unknown("the canary notebook did not run"),
            "under_load": under_load if sweep else unknown("the sweep did not run")}


def build_passport(campaign, arm, arm_dir: ArmDir, engine_died: bool = False) -> Passport:
    """The passport from the arm's records; engine_died: the engine exited before the arm finished."""
    engine = read_json(arm_dir.engine_json, {}) or {}
    results = read_json(arm_dir.results, {}) or {}
    label = ArmResults.model_validate(results).label(engine_died=engine_died)
    protocol = campaign.protocol_for(arm)
    sizing = results.get("sizing")
    canaries = results.get("canaries")
    sweep = results.get("sweep")
    prec = protocol.precision
    manifest = run_record(arm_dir)

    identity = {
        "arm": arm.name,
        "model": engine.get("model") or unknown("the engine was not started"),
        "engine": engine.get("identity") or unknown("the engine was not started"),
        "launch": engine.get("launch") or unknown("the engine was not started"),
        "host": engine.get("host") or recorded_host(arm_dir) or run_host(campaign),
        "formats": {"weights": prec.weights, "kv_cache": prec.kv_cache,
                    "recurrent_state": (sizing or {}).get("state_precision") or (
                        prec.state if prec.state != "none" else "not applicable: no recurrent layers")},
        "speculative_decoder": engine.get("speculative_decoding") or arm.engine.speculative_decoding(),
        "engine_build": ({"line": engine["build_line"]} if engine.get("build_line") else
                         unknown("the engine was not started")),
        "kernel_choice": engine.get("kernel_choice") or unknown("the engine was not started"),
    }
    proto = {
        "workload": protocol.workload.model_dump(),
        "harness": (describe_revision(manifest["harness"]) if manifest.get("harness") else
                    # a run recorded before the manifest held the revision: keep what its passport said
                    ((read_json(arm_dir.passport_json, {}) or {}).get("protocol") or {})
                    .get("harness", "not recorded")),
        "decoding": protocol.decoding.describe(),
        "output_budget_tokens": protocol.workload.output_tokens.describe(),
        "prompt_tokens": protocol.workload.prompt_tokens.describe(),
        "arrival": protocol.arrival.model_dump() | protocol.arrival.evidence(),
        "prefix_cache": protocol.prefix_cache + (", every point's prompts salted apart (cache_salt)"
                                                 if protocol.cache_salt else ""),
        "warmup_requests_per_point": protocol.warmup_requests,
        "cooldown_requests_per_point": {lv["level"]: protocol.arrival.cooldown_requests(lv, protocol)
                                        for lv in protocol.arrival.load_levels()},
        "requests_per_point": protocol.requests_per_point,
        "repetitions": repetitions_part(protocol, arm_dir, sweep, manifest),
        "seeds": protocol.seeds,
        "context_length": protocol.context_length,
        "slo": protocol.slo.model_dump(),
        "overrides": arm.protocol_overrides,
        "precision": arm_precision(prec, manifest.get("precision")),
    }
    if protocol.arrival.kind == "trace":
        proto |= replayed_protocol(protocol, arm_dir, proto["arrival"])
    proto["prompts_sent"] = prompts_sent(sweep, arm_dir)
    capacity = {
        "configured": engine.get("configured_capacity") or unknown("the engine was not started"),
        "realized": engine.get("realized_capacity") or unknown("the engine did not report it"),
        "predicted": (sizing or {}).get("predicted_capacity") or unknown("the sizing notebook did not run"),
    }
    validity = {
        "canaries": (canary_validity(canaries) if canaries else unknown("the canary notebook did not run")),
        # The campaign's gate, the same for every arm: what it declared out of scope, and why.
        "gate": {"suite": protocol.canaries.suite, "stages": list(protocol.stages),
                 "out_of_scope": dict(protocol.canaries.out_of_scope) or "none: every capability gates",
                 "gated": "canaries" in protocol.stages},
        "capability_probe": (canaries or {}).get("probe") or unknown("the canary notebook did not run"),
        "capacity": capacity,
        "discard_rules": protocol.discard_rules.model_dump(),
        "discards": worded_discards(sweep) if sweep else unknown("the sweep did not run"),
        "error_counts": (sweep or {}).get("error_counts") or (unknown("the sweep did not run") if not sweep else {}),
        "failure_counts": failure_counts(canaries, sweep),
        "reconciliation": arm_reconciliation(sweep["points"]) if sweep else unknown("the sweep did not run"),
        "harness_ceiling": ({k: v for k, v in sweep["harness_ceiling"].items() if k != "ladder"}
                            if sweep and sweep.get("harness_ceiling") else
                            unknown("no harness ceiling was recorded for this sweep" if sweep
                                    else "the sweep did not run")),
        "length_control": (sweep or {}).get("length_control") or unknown("the sweep did not run"),
        "load_validity": (sweep or {}).get("load_validity") or unknown("the sweep did not run"),
        "prefix_cache": (sweep or {}).get("prefix_cache") or unknown("the sweep did not run"),
        "gpu_telemetry": (sweep or {}).get("gpu_telemetry") or unknown("the sweep did not run"),
        "engine_restarts": engine.get("restarts", 0),
    }
    if sweep:
        results_part = {
            "label": label,
            "points": sweep["points"],
            "peak_engine_rss_gib": sweep.get("peak_engine_rss_gib") or unknown("not sampled"),
            "energy": energy_of(sweep.get("gpu_telemetry")),
            "raw": {"requests": arm_dir.requests.name, "engine_log": arm_dir.engine_log.name},
        }
    else:
        held = canaries and canaries.get("verdict") != "PASS"
        results_part = {"label": label, **unknown("the load sweep did not run" + (
            f" (canaries {canaries['verdict']}" + (f": {canaries['reason']})" if canaries.get("reason") else ")")
            if held else ""))}
    return Passport.model_validate({"passport_version": 1, "campaign": campaign.name, "identity": identity,
                                    "protocol": proto, "validity": validity, "results": results_part})


def _fmt(v) -> str:
    if isinstance(v, dict) and set(v) == {"unknown"}:
        return f"*not known: {v['unknown']}*"
    if isinstance(v, float):
        return f"{v:,.2f}"
    if isinstance(v, (dict, list)):
        return "`" + json.dumps(v, default=str) + "`"
    return str(v)


def _rows(prefix: str, value, depth: int = 0):
    """Flatten nested fields into (dotted name, value) rows, two levels deep."""
    if isinstance(value, dict) and not (set(value) == {"unknown"}) and depth < 2 and value:
        for k, v in value.items():
            yield from _rows(f"{prefix}.{k}" if prefix else k, v, depth + 1)
    else:
        yield prefix, value


def passport_markdown(p: dict) -> str:
    lines = [f"# Benchmark passport: {p['identity']['arm']} ({p['campaign']})", ""]
    for part in ("identity", "protocol", "validity"):
        lines += [f"## {part.capitalize()}", "", "| field | value |", "|---|---|"]
        for k, v in _rows("", p[part]):
            text = " ".join(v) if isinstance(v, list) and all(isinstance(x, str) for x in v) and k.endswith("command") \
                else topology_line(v) if k.endswith("host.topology") and isinstance(v, dict) else _fmt(v)
            text = text.replace("|", "\\|")
            lines.append(f"| {k} | {text} |")
        lines.append("")
    lines += ["## Results", ""]
    res = p["results"]
    if "points" not in res:
        if "label" in res:
            lines += [f"Label: **{res['label']}**.", ""]
        lines.append(_fmt({"unknown": res["unknown"]}))
    else:
        lines.append(f"Label: **{res['label']}**. Peak engine RSS: {_fmt(res['peak_engine_rss_gib'])} GiB. "
                     f"Energy: {_fmt(res['energy'])}.")
        lines += ["", "A tail percentile is shown only where the point has the requests it needs (p95: 20, p99: 100); "
                  "below that the column gives the maximum of its n requests (or, in a record without it, the "
                  "interpolated value, named so).", "",
                  "| point | completed | TTFT p50 / tail ms | TPOT p50 / tail ms | E2E p50 / p95 / p99 ms | out tok/s "
                  "| goodput req/s |",
                  "|---|---|---|---|---|---|---|"]
        for name, s in res["points"].items():
            n = s.get("completed") or 0

            def g(k, n=n):
                v = s.get(k)
                if v is None:
                    return "-"
                q = int(k.rsplit("_p", 1)[1]) if "_p" in k else None
                if q and q > 50 and n < min_sample(q):
                    return undersampled_text(q, n, v, s.get(f"{k.rsplit('_p', 1)[0]}_max"))
                return f"{v:,.1f}"
            ttft, tpot, e2e = (" / ".join(map(g, columns(cell))) for cell in
                               (("ttft_ms", "p50", "p99"), ("tpot_ms", "p50", "p99"), ("e2e_ms", "p50", "p95", "p99")))
            lines.append(f"| {name} | {s['completed']}/{s['requests']} | {ttft} | {tpot} | {e2e} | "
                         f"{g('output_throughput_tok_s')} | {g('goodput_rps')} |")
    return "\n".join(lines) + "\n"


def write_passport(campaign, arm, arm_dir: ArmDir, engine_died: bool = False) -> Passport:
    """passport.json (validated) and its readable twin passport.md."""
    p = build_passport(campaign, arm, arm_dir, engine_died=engine_died)
    data = model_json(p)
    write_json_atomic(arm_dir.passport_json, data)
    arm_dir.passport_md.write_text(passport_markdown(data))
    return p
