"""The load sweep for one arm: every concurrency level, repetitions, raw records, summaries."""
from __future__ import annotations

import statistics

from tqdm import tqdm

from .loadgen import run_closed_loop
from .metrics import point_summary
from .models import artifacts_for
from .records import RecordWriter, read_records
from .telemetry import RssSampler, metrics_delta, scrape_metrics
from .workload import client_tokenizer, synthetic_prompts


def cooldown_requests(concurrency: int) -> int:
    """Requests sent after the measured ones so the last measured request still runs at full
    concurrency (a closed loop with a fixed count otherwise drains at its end)."""
    return concurrency - 1


def requests_at(protocol, concurrency: int) -> int:
    return protocol.warmup_requests + protocol.requests_per_point + cooldown_requests(concurrency)


def point_name(concurrency: int, repetition: int) -> str:
    return f"c{concurrency}-r{repetition}"


def run_sweep(session, run_id: str, progress: bool = True) -> dict:
    """Run every point of the arm's protocol; records go to requests.jsonl as they complete."""
    protocol = session.protocol
    target = session.target()
    art = artifacts_for(session.campaign.model) if session.adapter.artifacts else None
    tokenizer = client_tokenizer(str(art.hf_dir)) if art and art.hf_dir else None
    if tokenizer is None:
        raise ValueError("the client tokenizer needs model.hf_path (a directory with tokenizer.json)")
    records_path = session.arm_dir / "requests.jsonl"
    done_points = {r.point for r in read_records(records_path) if r.phase == "measure"}
    levels = protocol.arrival.concurrency
    total = sum(requests_at(protocol, c) for c in levels) * protocol.repetitions
    pid = session.engine.get("pid") or (session.adapter.proc.pid if session.adapter.proc else None)
    points: dict[str, dict] = {}
    telemetry: dict[str, dict] = {}
    bar = tqdm(total=total, desc=f"{session.arm.name} requests", disable=not progress)
    with RssSampler(pid) as rss, RecordWriter(records_path) as writer:
        for rep in range(protocol.repetitions):
            seed = protocol.seeds[rep]
            for c in levels:
                name = point_name(c, rep)
                if name in done_points:
                    bar.update(requests_at(protocol, c))
                    continue
                prompts = synthetic_prompts(protocol.workload, tokenizer, requests_at(protocol, c),
                                            seed=seed * 1000 + c)
                before = scrape_metrics(target.base_url, session.adapter.metrics_path, target.headers)
                base = {"run_id": run_id, "arm": session.arm.name, "point": name, "repetition": rep,
                        "concurrency": c}
                run_closed_loop(target, prompts, tokenizer, concurrency=c, warmup=protocol.warmup_requests,
                                writer=writer, base=base, progress=bar, cooldown=cooldown_requests(c), alive=session.adapter.is_alive
                                if session.adapter.proc else (lambda: True))
                after = scrape_metrics(target.base_url, session.adapter.metrics_path, target.headers)
                telemetry[name] = metrics_delta(before, after)
        peak = rss.peak_bytes
    bar.close()
    records = read_records(records_path)
    for rep in range(protocol.repetitions):
        for c in levels:
            name = point_name(c, rep)
            recs = [r for r in records if r.point == name]
            s = point_summary(recs, protocol.slo)
            s["concurrency"] = c
            s["repetition"] = rep
            points[name] = s
    return summarize_sweep(points, telemetry, peak, protocol)


def summarize_sweep(points: dict, telemetry: dict, peak_rss_bytes: int, protocol) -> dict:
    errors: dict[str, int] = {}
    for s in points.values():
        for k, v in s.get("errors", {}).items():
            errors[k] = errors.get(k, 0) + v
    short = sum(s.get("length_not_honoured", 0) for s in points.values())
    completed = sum(s.get("completed", 0) for s in points.values())
    load_validity = {}
    for name, s in points.items():
        held = s.get("in_flight_mean")
        load_validity[name] = {
            "configured_concurrency": s["concurrency"],
            "in_flight_mean": held,
            "littles_law_concurrency": s.get("littles_law_concurrency"),
            # The client kept the configured number of requests in flight through the window.
            "valid": held is not None and abs(held - s["concurrency"]) <= 0.1 * s["concurrency"],
        }
    return {
        "points": points,
        "telemetry": telemetry,
        "peak_engine_rss_gib": round(peak_rss_bytes / 2**30, 3) if peak_rss_bytes else None,
        "error_counts": {"admission_rejected": errors.get("admission_rejected", 0),
                         "timeout": errors.get("timeout", 0), "transport": errors.get("transport", 0),
                         "engine_died": errors.get("engine_died", 0), "http_error": errors.get("http_error", 0),
                         "malformed_stream": errors.get("malformed_stream", 0),
                         "length_truncated": short},
        "length_control": {"requested_output_tokens": protocol.workload.output_tokens,
                           "completed_requests": completed, "shorter_than_requested": short,
                           "honoured": short == 0},
        "load_validity": load_validity,
        "decode_tok_s_per_stream_median": statistics.median(
            [s["decode_tok_s_per_stream_mean"] for s in points.values() if s.get("decode_tok_s_per_stream_mean")]
        ) if any(s.get("decode_tok_s_per_stream_mean") for s in points.values()) else None,
    }
