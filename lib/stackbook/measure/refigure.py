"""A finished sweep's point figures recomputed from its raw records by today's code.

Every figure of a point is a function of `requests.jsonl`; the readings taken while it ran (the
engine's counters, CPU, telemetry) are not, and stay as recorded. When a rule that turns records
into figures is corrected, a committed run is brought up to it from its own records, the points'
validity and the preregistered discards judged again, and the sweep says so: which revision
recomputed the figures, beside the revision that measured them."""
from __future__ import annotations

from stackbook.measure.metrics import point_summary
from stackbook.measure.sweep import summarize_sweep
from stackbook.measure.sweep_point import with_implied_reuse


# What the engine told the run of its length control: no record says it again, so it is kept.
ENGINE_LENGTH_FIELDS = ("method", "controlled", "honoured")


def kept_length_control(stored: dict, recomputed: dict) -> dict:
    """The recomputed length control with the engine's own words kept: its method, and, where it
    offers none, that the lengths were not controlled."""
    kept = recomputed | {k: stored[k] for k in ("method",) if k in stored}
    if stored.get("controlled") is False:
        kept.update({k: stored[k] for k in ENGINE_LENGTH_FIELDS if k in stored})
    return kept


def refigured_sweep(sweep: dict, records: list, protocol, revision: dict) -> dict:
    """The sweep section with every point's figures recomputed from its latest attempt's records,
    and its validity, discards and totals summed again."""
    points = {}
    implied = protocol.arrival.implied_reuse()
    for name, stored in sweep["points"].items():
        mine = [r for r in records if r.point == name]
        kept = {k: v for k, v in stored.items() if k != "discarded"}
        points[name] = kept | point_summary(mine, protocol.slo) if mine else kept
        if mine and implied and isinstance(kept.get("prefix_cache"), dict):
            points[name]["prefix_cache"] = with_implied_reuse(kept["prefix_cache"], mine, implied)
    ceiling = sweep.get("harness_ceiling")
    summed = summarize_sweep(points, sweep.get("telemetry") or {}, 0, protocol,
                             ceiling if ceiling and "unknown" not in ceiling else None)
    summed["peak_engine_rss_gib"] = sweep.get("peak_engine_rss_gib")
    summed["length_control"] = kept_length_control(
        sweep.get("length_control") or {}, summed.get("length_control") or {}
    )
    return sweep | summed | {"figures_recomputed": {"by": revision, "from": "requests.jsonl, latest attempts"}}
