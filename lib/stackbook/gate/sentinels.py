"""Sentinels: requests with known answers (the campaign's gating canary prompts) mixed into every
sweep point at a small share (protocol.canaries.sentinel_share), and judged after the point. They measure *completed but
wrong* under load, where batching, preemption or a cache can change an answer that was right at
temperature 0 on an idle engine. They are recorded apart (phase "sentinel"): they add load but
never enter the latency statistics.
"""
from __future__ import annotations

from stackbook.gate.canaries import Contains, Regex, Suite, out_of_scope_checks
from stackbook.loadgen.phases import Phase
from stackbook.loadgen.workload import PromptSpec

SENTINEL_KINDS = (Contains, Regex)  # one exchange, a semantic answer (an exact reference is batch-variant)


def sentinel_checks(suite: Suite, out_of_scope: dict[str, str]) -> list:
    """The gating checks a sentinel can carry: single-exchange ones with a semantic answer."""
    excluded = out_of_scope_checks(suite, out_of_scope)
    return [c for c in suite.checks if isinstance(c, SENTINEL_KINDS) and c.id not in excluded]


def sentinel_count(measured: int, share: float) -> int:
    """Sentinels for a point of `measured` requests: at least one while the share is above 0."""
    return max(1, round(measured * share)) if measured and share > 0 else 0


def mix_sentinels(prompts: list[PromptSpec], checks: list, warmup: int, cooldown: int,
                  share: float) -> list[PromptSpec]:
    """The point's prompts with sentinels inserted evenly among the measured ones (the warm-up and
    the cool-down are left as they are). Sentinels get request indices after every workload prompt."""
    measured = len(prompts) - warmup - cooldown
    k = sentinel_count(measured, share) if checks else 0
    if not k:
        return prompts
    every = max(1, measured // k)
    sentinels = [PromptSpec(len(prompts) + j, checks[j % len(checks)].messages(), 0,
                            output_tokens=checks[j % len(checks)].max_tokens, sentinel=checks[j % len(checks)].id)
                 for j in range(k)]
    out = list(prompts[:warmup])
    for i, p in enumerate(prompts[warmup:warmup + measured]):
        out.append(p)
        if (i + 1) % every == 0 and sentinels and len(out) - warmup < measured + k:
            out.append(sentinels.pop(0))
    out += sentinels  # any left over go last among the measured
    return out + list(prompts[warmup + measured:])


def judge_sentinels(records, checks: list) -> dict:
    """After the point: every sentinel reply judged by its check. A reply cut at its token bound
    is judged too (its text is there; an engine babbling to the bound is wrong, not excused):
    answered counts the replies with text, answered_wrongly those judged wrong, and
    completed_but_wrong the wrong ones among the replies that completed (no error)."""
    by_id = {c.id: c for c in checks}
    mine = [r for r in records if r.phase == Phase.SENTINEL and r.sentinel in by_id]
    answered = [r for r in mine if r.ok or r.error_class == "length_truncated"]
    wrong = [r for r in answered if not by_id[r.sentinel].judge(r.output_text, {})["passed"]]
    return {"sent": len(mine), "completed": sum(r.ok for r in mine), "answered": len(answered),
            "answered_wrongly": len(wrong), "completed_but_wrong": sum(r.ok for r in wrong),
            "wrong": [{"check": r.sentinel, "output": r.output_text[:120],
                       **({"cut_at_bound": True} if not r.ok else {})} for r in wrong]}

