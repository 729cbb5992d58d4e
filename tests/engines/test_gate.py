"""The validity gate against a real engine: an arm served with a broken chat template (it drops
the user's message) fails its canaries, is HOLD everywhere, and is never ranked."""
import json

import nbformat
import pytest

pytestmark = pytest.mark.engine

BROKEN_TEMPLATE = "{% for message in messages %}{% endfor %}<|im_start|>assistant\n"

CAMPAIGN = """
name: gate-test
model: {source: embedded}
protocol:
  workload: {kind: synthetic, prompt_tokens: 32, output_tokens: 8}
  arrival: {kind: closed_loop, concurrency: [1]}
  context_length: 512   # the needle trials stay short: this test is about the template
  requests_per_point: 3
  repetitions: 1
  warmup_requests: 0
  canaries:
    suite: SUITE   # the checks a dropped user message fails; the whole suite is test_end_to_end's
    run_sweep_on_hold: true
arms:
  - name: good
    engine: {kind: llama_cpp, parallel: 1}
  - name: broken-template
    engine: {kind: llama_cpp, parallel: 1, extra_args: [--chat-template-file, TEMPLATE]}
"""


@pytest.fixture(scope="module")
def run(run_module_campaign, tmp_path_factory, canary_subset):
    d = tmp_path_factory.mktemp("gate")
    (d / "broken.jinja").write_text(BROKEN_TEMPLATE)
    suite = canary_subset("capital-of-france", "capital-exact-reference", "two-plus-two")
    return run_module_campaign(CAMPAIGN.replace("TEMPLATE", str(d / "broken.jinja")).replace("SUITE", suite),
                               d / "gate.yaml",
                               run_id=f"test-{d.name}")


def test_broken_arm_is_hold_and_good_arm_passes(run):
    good = json.loads(run.arm("good").results.read_text())["canaries"]
    bad = json.loads(run.arm("broken-template").results.read_text())["canaries"]
    assert good["verdict"] == "PASS"
    assert bad["verdict"] == "HOLD"
    assert "capital-of-france" in bad["failed"]
    gating = bad["counts"]["gating"]
    # The engine answered every check, wrongly: each failure is a wrong reply (ended by itself or
    # babbling to its token bound), none a failed request.
    assert gating["failed"] >= 1 and gating["completed_but_wrong"] + gating["length_truncated"] == gating["failed"]
    assert gating["request_failed"] == 0


def test_hold_label_reaches_passport_and_report(run):
    p = json.loads(run.arm("broken-template").passport_json.read_text())
    assert p["validity"]["canaries"]["verdict"] == "HOLD"
    assert p["results"]["label"] == "HOLD"          # measured on request, labelled everywhere
    assert "HOLD" in run.arm("broken-template").passport_md.read_text()
    nb = nbformat.read(run.analysis_notebook, as_version=4)
    text = "\n".join(o.get("data", {}).get("text/markdown", "") for c in nb.cells for o in c.get("outputs", []))
    assert "Not ranked (canaries HOLD): broken-template" in text


def test_template_difference_makes_the_arm_not_comparable(run):
    engines = {a: json.loads(run.arm(a).engine_json.read_text()) for a in ("good", "broken-template")}
    assert (engines["good"]["identity"]["chat_template_sha256"]
            != engines["broken-template"]["identity"]["chat_template_sha256"])
    nb = nbformat.read(run.analysis_notebook, as_version=4)
    text = "\n".join(o.get("data", {}).get("text/markdown", "") for c in nb.cells for o in c.get("outputs", []))
    assert "Not comparable (protocol differs): broken-template" in text
