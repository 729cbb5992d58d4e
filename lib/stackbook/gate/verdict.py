"""The gate's verdict over a suite's results: PASS or HOLD from the gating checks, and every check
counted by the cause of its failure, the gating and the declared out-of-scope ones apart."""
from __future__ import annotations


def outcome(r: dict) -> str:
    """One check's outcome as the passport lists it."""
    return ("PASS" if r["passed"] else "FAIL") + (" (out of scope)" if r.get("out_of_scope") else "")


FAILURE_CLASSES = ("admission_rejected", "length_truncated", "schema_or_tool_failure", "completed_but_wrong",
                   "request_failed")


def failure_class(r: dict) -> str | None:
    """Why a check failed, one class each (None when it passed): refused at admission, cut at its
    token bound, a reply that broke its schema or made no valid tool call (each check kind says
    which through its error class), a complete reply with the wrong answer, or a request that
    failed otherwise (timeout, transport, HTTP error). A wrong text reply that ran into its
    token bound counts as truncated: it never ended by itself."""
    if r["passed"]:
        return None
    error = r.get("error_class")
    named = {"admission_rejected": "admission_rejected", "length_truncated": "length_truncated",
             "schema_failure": "schema_or_tool_failure"}
    if error in named:
        return named[error]
    if error not in (None, "none"):
        return "request_failed"
    return "length_truncated" if r.get("finish_reason") == "length" else "completed_but_wrong"


def failure_counts(results: list[dict]) -> dict:
    """Checks run and failed, and the failures by class: every class present, zero or not."""
    classes = [failure_class(r) for r in results]
    return {"checks": len(results), "failed": sum(c is not None for c in classes),
            **{name: classes.count(name) for name in FAILURE_CLASSES}}


def verdict(results: list[dict]) -> dict:
    """PASS when every gating check passed. The gating set is the campaign's: every check but
    those whose capability the campaign declared out of scope, identical for every arm."""
    gating = [r for r in results if not r.get("out_of_scope")]
    failed = [r["id"] for r in gating if not r["passed"]]
    refused = [r for r in gating if r.get("refused") is not None]
    if not gating:
        reason = "no gating check: every check of the suite was declared out of scope"
    elif len(refused) == len(gating):
        reason = (f"every canary request was refused ({refused[0]['error_class']}: "
                  f"{str(refused[0]['refused'])[:160]}): the endpoint answered no check")
    elif failed:
        reason = f"{len(failed)} of {len(gating)} gating checks failed: {', '.join(failed)}"
    else:
        reason = f"all {len(gating)} gating checks passed"
    return {"verdict": "PASS" if gating and not failed else "HOLD", "reason": reason, "failed": failed,
            "gating_checks": len(gating), "passed": len(gating) - len(failed),
            "out_of_scope": {r["id"]: r["out_of_scope"] for r in results if r.get("out_of_scope")},
            "checks": [{"id": r["id"], "kind": r["kind"], "capability": r.get("capability"),
                        "gating": not r.get("out_of_scope"), "outcome": outcome(r),
                        "failure": failure_class(r)} for r in results],
            # Requests asked again after a rate limit (gate.rate_limit): waited out, not hidden.
            "rate_limit_retries": sum(r.get("rate_limit_retries", 0) for r in results),
            # Every check counted, by cause of failure: the gating ones and the declared
            # out-of-scope ones apart (those run and are reported, but do not gate).
            "counts": {"gating": failure_counts(gating),
                       "out_of_scope": failure_counts([r for r in results if r.get("out_of_scope")])}}
