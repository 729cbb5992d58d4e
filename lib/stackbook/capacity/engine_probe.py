"""A probe on a live engine: one closed-loop point at the probed concurrency, sent by the meter
the sweep sends its points by (measure.point_meter: the protocol's prompts, warm-up, cool-down,
prefix-cache preparation), its records appended to the arm's capacity_requests.jsonl as they
complete, and judged by the SLO.

A probe is decided only where its load held: a window that kept fewer clients in flight than
asked measured a lighter load, so its attainment would flatter the engine; it comes back
undecided, and the search probes it again with more requests. A probe whose records are already
complete in the file (an interrupted search resumed) is judged from them and not sent again: the
search is a function of its probes' verdicts, so it retraces the same path. Probes carry no
canary sentinels: correctness is the sweep's to check, and a probe's window holds only the
requests it judges, so both sides of its load check count the same requests.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from stackbook.capacity.verdict import ProbeVerdict, attainment_verdict
from stackbook.loadgen.phases import Phase
from stackbook.loadgen.records import RecordWriter, read_records
from stackbook.measure.arm_session import LiveArm
from stackbook.measure.metric_definitions import columns
from stackbook.measure.metrics import client_gaps, point_summary
from stackbook.measure.validity import closed_loop_validity, measured_requests_for

PROBE_FIELDS = ("concurrency", "requests", "completed", "slo_attainment",
                *columns(("ttft_ms", "p50", "p99"), ("tpot_ms", "p50", "p99"), ("e2e_ms", "p50")),
                "output_throughput_tok_s", "request_throughput_rps",
                "in_flight_mean", "littles_law_concurrency", "window_s")


def probe_name(repetition: int, index: int, concurrency: int) -> str:
    return f"cap-r{repetition}-p{index}-c{concurrency}"


def probe_requests(concurrency: int, requests: int) -> int:
    """The search's request count, raised to the fewest with which the concurrency can hold."""
    return max(requests, measured_requests_for(concurrency))


def judge_probe(concurrency: int, records: list, slo) -> tuple[ProbeVerdict, dict]:
    """The verdict on one probe's records, and the figures it was read from."""
    s = point_summary(records, slo) | client_gaps(records) | {"concurrency": concurrency}
    measured = [r for r in records if r.phase == Phase.MEASURE]
    span = (max(r.end_s for r in records) - min(r.sent_s for r in records)) if records else 0.0
    met = round((s.get("slo_attainment") or 0) * len(measured))
    load = closed_loop_validity(s) if measured else {"valid": False}
    figures = {k: s.get(k) for k in PROBE_FIELDS} | {"met": met, "load_held": load["valid"], "span_s": span}
    if not load["valid"]:
        held = s.get("in_flight_mean")
        reason = (f"load not held: {held:.2f} of {concurrency} in flight over the measured requests, so the "
                  f"attainment ({met}/{len(measured)}) describes a lighter load" if held is not None
                  else "no measured request completed")
        return ProbeVerdict(concurrency, "undecided", reason, len(measured), span, met), figures
    return attainment_verdict(concurrency, met, len(measured), slo.attainment, duration_s=span), figures


@dataclass
class EngineProbe:
    """Probe(load, requests) against the arm's engine in one repetition of its sweep."""
    session: LiveArm
    repetition: int
    writer: RecordWriter
    tokenizer: object
    run_id: str
    progress: object = None  # a tqdm bar of requests, or None
    calls: int = 0
    figures: dict[str, dict] = field(default_factory=dict)  # per probe: what it measured
    _earlier: dict[str, list] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for r in read_records(self.session.arm_dir.capacity_requests, latest_attempt=True):
            self._earlier.setdefault(r.point, []).append(r)

    def __call__(self, load: float, requests: int) -> ProbeVerdict:
        c = int(load)
        if c != load or c < 1:
            raise ValueError(f"a closed-loop concurrency is a whole number of at least 1, not {load}")
        self.calls += 1
        name = probe_name(self.repetition, self.calls, c)
        n = probe_requests(c, requests)
        records = self._earlier.get(name, [])
        if sum(r.phase == Phase.MEASURE for r in records) < n:  # not run yet, or cut short
            attempt = max((r.attempt for r in records), default=-1) + 1
            records = self._send(name, c, n, attempt)
        verdict, figures = judge_probe(c, records, self.session.protocol.slo)
        self.figures[name] = figures | {"verdict": verdict.verdict, "reason": verdict.reason}
        return verdict

    def _send(self, name: str, c: int, n: int, attempt: int) -> list:
        from stackbook.loadgen.load_point import Load, LoadPoint
        from stackbook.measure.point_meter import PointMeter, arm_target

        protocol, load = self.session.protocol, Load.clients(c)
        sent = protocol.warmup_requests + n + protocol.arrival.cooldown_requests(load.level(), protocol)
        meter = PointMeter(self.session, self.run_id, arm_target(self.session), self.tokenizer, self.writer,
                           progress=self.progress)
        return meter.send(LoadPoint(load, self.repetition, sent, attempt, name)).records
