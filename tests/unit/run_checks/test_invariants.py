"""The invariants every run's claims satisfy, read from its stored files: each names what today's
offending runs broke (slim copies kept in tests/fixtures/offending_runs, taken before those runs
were regenerated), and analyses built from generated records satisfy them."""
import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stackbook.run_checks.invariants import INVARIANTS, RunFacts, violations

FIXTURES = Path(__file__).parents[2] / "fixtures" / "offending_runs"


def _facts(name: str) -> RunFacts:
    data = json.loads((FIXTURES / f"{name}.json").read_text())
    return RunFacts(data["analysis"], data["replicas"], data["passports"], data["requests"], data["manifest"])


# Each offending run, the invariant it broke and words its violation must carry.
NAMED = [
    ("known-effect", "a load proven outside has requests outside",
     "fast: load 0.4 is called proven outside the SLO (exact), yet 120 of 120"),
    ("known-effect", "a load proven outside has requests outside",
     "fast-again: load 0.8 is called proven outside the SLO (exact), yet 80 of 80"),
    ("known-effect", "SLO claims monotone in the load",
     "fast: max load inside the SLO (estimate) is 0.8, above the load proven outside (0.4)"),
    ("known-effect", "identical replicas agree",
     "fast-again is inside the SLO by its estimate at 0.4 and its identical replica fast proven outside at 0.4"),
    ("known-effect", "each sentence states its own sample",
     "states [(2, 2, 80, 80)]; its decisions used [(3, 3, 120, 120)]"),
    ("known-effect", "recorded from committed code, or marked", "diff sha256 2575a7579570c539"),
    ("four-engines", "each sentence states its own sample",
     "states [(1, 1, 12, 12)]; its decisions used [(1, 2, 12, 24)]"),
    ("burstiness", "each sentence states its own sample",
     "states [(2, 1, 128, 64)]; its decisions used [(1, 1, 64, 64)]"),
    ("capacity", "recorded from committed code, or marked", "diff sha256 4a471e035c88c1c4"),
    ("agent-log", "the passport states what was sent",
     "llama-cpp: the passport states prompts of 128 to 128 tokens; 24 of 24 measured requests carried 118 to 320"),
    ("agent-log", "the passport states what was sent",
     "vllm-cpu: the passport states replies of 48 to 48 tokens; 24 of 24 measured requests carried 13 to 32"),
]


@pytest.mark.parametrize("run,invariant,words", NAMED, ids=[f"{r}: {i}" for r, i, _ in NAMED])
def test_the_audit_names_each_offending_run(run, invariant, words):
    found = INVARIANTS[invariant](_facts(run))
    assert any(words in v for v in found), found


def test_what_an_offending_run_did_not_break_holds():
    """The checks name what is wrong and nothing else: agent-log broke only its passport."""
    broken = {name for name, found in violations(_facts("agent-log")).items() if found}
    assert broken == {"the passport states what was sent"}


def test_a_run_marked_as_recorded_from_uncommitted_code_passes_that_invariant():
    facts = _facts("capacity")
    for passport in facts.passports.values():
        passport["protocol"]["harness"] = ("stackbook 0.1.0 (74b2c2f23e87), "
                                           "recorded from uncommitted code (diff sha256 4a47)")
    assert INVARIANTS["recorded from committed code, or marked"](facts) == []


def test_a_flagged_bound_passes_and_a_measured_value_inside_the_interval_needs_no_flag():
    facts = _facts("capacity")
    facts.analysis["demand_maps"]["llama-cpp"]["bound_exceeded"] = "measured 1.06 times its bound"
    assert INVARIANTS["throughput within its bound, or flagged"](facts) == []
    facts.analysis["demand_maps"]["llama-cpp"] = {"bound_rps": 1.88, "bound_interval": 0.02,
                                                  "measured_saturation_rps": 1.99}
    assert "measured 1.99 req/s above its bound 1.88 × (1 ± 0.02), unflagged" in \
        INVARIANTS["throughput within its bound, or flagged"](facts)[0]
    # capacity's own llama-cpp: 1.988 against 1.878 × (1 ± 7.3%), inside the bound's interval
    assert INVARIANTS["throughput within its bound, or flagged"](_facts("capacity")) == []


# Generated campaigns: three arms, each over a subset of three loads, with one to three repetitions
# and any of them discarded. Whatever the records, every verdict sentence states its own sample.
def _frame(data) -> pd.DataFrame:
    rows = []
    for arm in ("a", "b", "c"):
        for load in data.draw(st.lists(st.sampled_from([1, 2, 4]), min_size=1, max_size=3, unique=True)):
            for rep in range(data.draw(st.integers(1, 3))):
                n = data.draw(st.integers(12, 40))
                base = data.draw(st.floats(10, 100))
                rows.append({"arm": arm, "label": "accepted", "load": load, "repetition": rep, "completed": n,
                             "requests": n, "discarded": data.draw(st.booleans()) and rep > 0,
                             "output_throughput_tok_s": 1000 / base, "ttft_ms_p50": 20 * base,
                             "tpot_ms_p50": base, "e2e_ms_p50": 30 * base})
    return pd.DataFrame(rows)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_every_generated_verdict_states_each_pair_s_own_sample(data):
    from stackbook.analysis.verdict import decisions, verdict_lines
    from stackbook.config.loading import load_campaign

    protocol = load_campaign("campaigns/aa-control.yaml").protocol
    df = _frame(data)
    found = decisions(df, protocol, {"a", "b", "c"})
    analysis = {"verdict": verdict_lines(df, found, protocol, "concurrency"),
                "decisions": [d.as_row() for d in found]}
    assert INVARIANTS["each sentence states its own sample"](RunFacts(analysis)) == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(20, 200), st.integers(0, 40)), min_size=1, max_size=4),
       st.sampled_from([0.9, 0.95, 0.99]))
def test_generated_slo_tables_never_call_a_load_outside_where_every_request_met_it(loads, attainment):
    """The SLO table's exact claims, over generated per-load counts (met of requests, rising loads):
    a load proven outside always has requests outside."""
    from stackbook.analysis.verdict import slo_capacity

    rows = [{"arm": "a", "label": "accepted", "status": "accepted", "load": i + 1, "requests": n,
             "slo_met": n - min(out, n), "slo_attainment": (n - min(out, n)) / n, "slo_attainment_lo": 0.0,
             "goodput_rps": 1.0, "queue_grew": False} for i, (n, out) in enumerate(loads)]
    table = slo_capacity(pd.DataFrame(rows), attainment)
    analysis = {"slo_capacity": table.reset_index().to_dict("records"), "load_table": rows}
    assert INVARIANTS["a load proven outside has requests outside"](RunFacts(analysis)) == []
