"""A discarded point's reason in words, each failed check beside its limit, from committed runs."""
import json

from stackbook.measure.validity import describe_validity, worded_discards


def _discards(run: str, arm: str) -> dict:
    sweep = json.loads(open(f"outputs/{run}/arms/{arm}/results.json").read())["sweep"]
    return {d["point"]: d["detail"] for d in worded_discards(sweep) if d["rule"] == "on_invalid_load"}


def test_a_closed_loop_names_the_side_that_fell_short_and_the_band_it_missed():
    """four-engines llama-cpp c2-r1 held 1.84 in flight; Little's law read 1.79, outside 1.80-2.20."""
    assert _discards("four-engines/reference", "llama-cpp")["c2-r1"] == (
        "1.79 by Little's law against 2 configured (kept: 1.80 to 2.20)")


def test_an_open_loop_names_its_late_sends():
    assert _discards("workloads/reference",
                     "vllm-cpu")["rate0.5-r1"] == "sends were late by 21.4 ms at p99 (limit 5 ms)"


def test_a_starved_client_is_said_so():
    # capacity's first committed run (AVX-512 EPYC, bf16), vllm-cpu c1-r1, as its results.json kept it
    v = {"configured_concurrency": 1, "in_flight_mean": 0.9890806925653137, "littles_law_concurrency": 0.98908069256,
         "client_gap_in_flight": 0.010919307434686318, "client_gap_ms_p99": 184.53156525180026, "valid": False,
         "client_loop_delay_ms_p99": 260.423, "client_delay_judged_ms": 260.423, "client_delay_ttft_share": 1.1456,
         "client_delay_tpot_share": 0.5544, "client_delay_valid": False}
    detail = describe_validity(v)
    assert detail.startswith("the client's own loop delay (260.4 ms at p99) came to 115% of TTFT p50")
    assert detail.endswith("(limit 5%): the client was starved of CPU")


def test_a_rate_that_strayed_from_its_schedule():
    v = {"configured_rate_rps": 2, "scheduled_rate_rps": 1.73, "achieved_rate_rps": 1.5, "schedule_lag_ms_p99": 1.0,
         "valid": False}
    assert describe_validity(v) == "sent at 1.5 req/s against the schedule's 1.73 (kept: within 5%)"


def test_the_passport_words_its_discards_as_the_report_does():
    """workloads vllm-cpu's passport listed the raw figures ("configured_rate_rps=0.5, ..."); it
    now gives the reason the analysis gives."""
    from stackbook.config.loading import load_campaign
    from stackbook.run_checks.passport import build_passport
    from stackbook.evidence.rundir import RunDir

    run = RunDir("outputs/workloads/reference")
    campaign = load_campaign(run.campaign_resolved)
    arm = next(a for a in campaign.arms if a.name == "vllm-cpu")
    passport = build_passport(campaign, arm, run.arm("vllm-cpu")).model_dump()
    details = {d["point"]: d["detail"] for d in passport["validity"]["discards"]}
    assert details["rate0.5-r1"] == "sends were late by 21.4 ms at p99 (limit 5 ms)"
    assert not any("=" in d for d in details.values())
