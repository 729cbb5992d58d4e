"""The canary step of 20_canaries: run the suite and the capability probe, write the verdict."""
from __future__ import annotations

import pandas as pd

from stackbook.evidence.files import update_results
from stackbook.gate.canaries import load_suite, run_suite
from stackbook.gate.verdict import failure_class, outcome, verdict


def arm_canaries(session, progress: bool = True) -> tuple[dict, pd.DataFrame]:
    from tqdm import tqdm

    suite, digest = load_suite(session.protocol.canaries.suite)
    bar = tqdm(total=len(suite.checks), desc="canaries", disable=not progress)
    from stackbook.measure.sweep import tokenizer_for
    tokenizer = tokenizer_for(session)
    results = run_suite(session.target(), suite, session.protocol.canaries.out_of_scope, progress=bar,
                        tokenizer=tokenizer, context_length=session.protocol.context_length)
    bar.close()
    v = verdict(results)
    from stackbook.gate.probe import probe_endpoint
    probe = probe_endpoint(session.adapter, session.target(), tokenizer,
                           (session.engine or {}).get("realized_capacity"))
    out = {**v, "suite": suite.suite, "suite_version": suite.version, "suite_sha256": digest, "results": results,
           "probe": probe}
    update_results(session.arm_dir, "canaries", out)
    table = pd.DataFrame([{"check": r["id"], "kind": r["kind"], "capability": r["capability"],
                           "result": outcome(r), "failure": failure_class(r) or "",
                           "output": (r.get("output") or "")[:80], "detail": r.get("detail")}
                          for r in results])
    return out, table


def verdict_summary(result: dict) -> str:
    """The verdict, the gating tally and the suite's identity, as Markdown."""
    scope = result.get("out_of_scope") or {}
    return (f"## Verdict: **{result['verdict']}**  \n"
            f"{result['passed']}/{result['gating_checks']} gating checks passed; "
            f"failed: {result['failed'] or 'none'}; "
            f"out of scope for this campaign: {', '.join(f'{k} ({why})' for k, why in scope.items()) or 'none'}.  \n"
            f"Suite `{result['suite']}` v{result['suite_version']}, sha256 `{result['suite_sha256'][:16]}…`")
