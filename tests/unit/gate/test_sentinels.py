"""Sentinels: known-answer canary prompts mixed into each sweep point and judged after it."""
from stackbook.gate.canaries import load_suite
from stackbook.gate.sentinels import judge_sentinels, mix_sentinels, sentinel_checks
from stackbook.loadgen.drivers import Target, run_closed_loop
from stackbook.loadgen.workload import ApproximateTokenizer, PromptSpec

from tests.support.records import request_record, sentinel_record

SCOPE = {"tool_calls": "t", "multi_turn": "m", "instruction_following": "i", "batch_invariance": "b"}


def test_the_sentinels_are_the_gating_single_exchange_checks():
    suite, _ = load_suite("embedded-smollm2")
    assert [c.id for c in sentinel_checks(suite, SCOPE)] == ["capital-of-france", "two-plus-two"]


def test_one_sentinel_per_eight_measured_requests_placed_among_them():
    suite, _ = load_suite("embedded-smollm2")
    checks = sentinel_checks(suite, SCOPE)
    prompts = [PromptSpec(i, [{"role": "user", "content": f"p{i}"}], 4) for i in range(2 + 16 + 3)]
    mixed = mix_sentinels(prompts, checks, warmup=2, cooldown=3, share=1 / 8)
    kinds = ["S" if p.sentinel else "w" if p.index < 2 else "c" if p.index >= 18 else "m" for p in mixed]
    assert "".join(kinds) == "ww" + "mmmmmmmmS" + "mmmmmmmmS" + "ccc"
    assert [p.sentinel for p in mixed if p.sentinel] == ["capital-of-france", "two-plus-two"]
    assert [p.index for p in mixed if p.sentinel] == [21, 22] and mixed[10].output_tokens == 16
    assert len(mix_sentinels(prompts[:4], checks, warmup=1, cooldown=0, share=1 / 8)) == 5  # at least one per point


def test_the_sentinel_share_is_the_protocols():
    from stackbook.config.protocol import Canaries
    suite, _ = load_suite("embedded-smollm2")
    checks = sentinel_checks(suite, SCOPE)
    prompts = [PromptSpec(i, [{"role": "user", "content": f"p{i}"}], 4) for i in range(2 + 16 + 3)]
    assert Canaries().sentinel_share == 1 / 8
    assert sum(p.sentinel is not None for p in mix_sentinels(prompts, checks, 2, 3, share=1 / 4)) == 4
    assert mix_sentinels(prompts, checks, 2, 3, share=0) == prompts  # none at 0


def test_sentinels_are_judged_after_the_point():
    suite, _ = load_suite("embedded-smollm2")
    checks = sentinel_checks(suite, SCOPE)
    out = judge_sentinels([sentinel_record("capital-of-france", "The capital of France is Paris."),
                           sentinel_record("two-plus-two", "2+2 is 5"),
                           sentinel_record("two-plus-two", "", error="timeout"),
                           # llama-server with a wrong RoPE base, babbling to the sentinel's bound:
                           sentinel_record("capital-of-france", "Cherche, I am here to help. Cherche, I am",
                                error="length_truncated")], checks)
    assert out == {"sent": 4, "completed": 2, "answered": 3, "answered_wrongly": 2, "completed_but_wrong": 1,
                   "wrong": [{"check": "two-plus-two", "output": "2+2 is 5"},
                             {"check": "capital-of-france", "output": "Cherche, I am here to help. Cherche, I am",
                              "cut_at_bound": True}]}


def test_a_sentinel_is_filed_apart_with_a_natural_end(start_calibration_server):
    """Against the calibration server (every reply stops at max_tokens) a sentinel is recorded as
    phase 'sentinel', bounded not forced, and its cut reply is truncation, never a measured request."""
    server = start_calibration_server()
    t = Target(server.base_url, "calibration", {"temperature": 0}, {"max_tokens": 8})
    prompts = [PromptSpec(0, [{"role": "user", "content": "x"}], 1),
               PromptSpec(1, [{"role": "user", "content": "2+2?"}], 3, output_tokens=4, sentinel="two-plus-two")]
    recs = sorted(run_closed_loop(t, prompts, ApproximateTokenizer(), concurrency=1, warmup=0, writer=None,
                                  base={"run_id": "t", "arm": "cal", "point": "p", "concurrency": 1}),
                  key=lambda r: r.request_index)
    assert [(r.phase, r.sentinel, r.length_controlled, r.error_class) for r in recs] == [
        ("measure", None, True, "none"), ("sentinel", "two-plus-two", False, "length_truncated")]
    assert recs[1].output_tokens_requested == 4


def test_sentinels_do_not_count_towards_a_points_completion():
    from stackbook.measure.sweep import latest_attempts
    recs = [sentinel_record("two-plus-two", "4")] + [
        request_record(request_index=i) for i in range(3)]
    assert latest_attempts(recs) == {"c1-r0": (0, 3)}
