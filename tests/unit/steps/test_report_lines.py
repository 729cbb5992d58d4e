"""Lines and tables the canary and sizing notebooks display, on hand-made results."""
from stackbook.steps.canaries import verdict_summary
from stackbook.steps.sizing import roofline_table


def test_verdict_summary():
    result = {"verdict": "HOLD", "passed": 5, "gating_checks": 6, "out_of_scope": {"tools": "no tools sent"},
              "failed": ["json"],
              "suite": "embedded", "suite_version": 3, "suite_sha256": "0123456789abcdef" + "f" * 48}
    assert verdict_summary(result) == (
        "## Verdict: **HOLD**  \n5/6 gating checks passed; failed: ['json']; "
        "out of scope for this campaign: tools (no tools sent).  \n"
        "Suite `embedded` v3, sha256 `0123456789abcdef…`")


def test_roofline_table_in_gb_per_second():
    s = {"hardware": {"name": "H100", "bandwidth_bytes_s": 3.35e12, "source": "catalog"},
         "roofline_decode_tok_s": 61.234}
    assert roofline_table(s)["value"].to_dict() == {
        "device": "H100", "bandwidth (GB/s)": 3350.0, "decode bound at this context (tok/s)": 61.2,
        "bandwidth source": "catalog"}
    assert roofline_table({**s, "roofline_decode_tok_s": None}).loc["decode bound at this context (tok/s)",
                                                                     "value"] == 0
