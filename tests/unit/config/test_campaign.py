"""Campaign files: valid ones load; bad ones fail fast, naming the file, the field and the fix,
before any engine starts."""
import os
import subprocess
import sys
import time

from typing import Annotated, Literal, Union

import psutil
import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from stackbook.config.errors import CampaignError, format_validation_error, locate
from stackbook.config.loading import load_campaign
from stackbook.engines import engine_kinds
from stackbook.engines.spec import free_port

GOOD = """
name: t
protocol:
  workload: {kind: synthetic, prompt_tokens: 64, output_tokens: 16}
  arrival: {kind: closed_loop, concurrency: [1, 2]}
arms:
  - name: a
    engine: {kind: llama_cpp}
  - name: b
    engine: {kind: vllm_cpu}
"""

KINDS = ", ".join(engine_kinds())  # the registry's kinds, in its order: whatever is registered


def test_quickstart_is_valid():
    c = load_campaign("campaigns/quickstart.yaml")
    assert [a.engine.kind for a in c.arms] == ["llama_cpp", "vllm_cpu"]
    assert c.protocol.decoding.resolved()["temperature"] == 0.0


def test_good_campaign_and_defaults(write_campaign):
    c = load_campaign(write_campaign(GOOD))
    assert c.protocol.arrival.concurrency == [1, 2]
    assert c.arm("b").engine.host == "127.0.0.1"


BAD = {
    "no client process": (GOOD.replace("protocol:\n", "protocol:\n  loadgen: {processes: 0}\n", 1),
                          ["protocol.loadgen.processes", "greater than or equal to 1"]),
    "missing arms": ("name: t\n", ["arms", "Field required", "Fix: add it"]),
    "wrong type": (GOOD.replace("concurrency: [1, 2]", "concurrency: four"),
                   ["protocol.arrival.concurrency", "Fix: give a YAML list"]),
    "unknown engine": (GOOD.replace("kind: vllm_cpu", "kind: vllm-cpu"),
                       ["arms[1].engine", "did you mean 'vllm_cpu'"]),
    "duplicate arm": (GOOD.replace("name: b", "name: a"), ["duplicate arm name 'a'"]),
    "misspelled key": (GOOD.replace("prompt_tokens", "promt_tokens"),
                       ["protocol.workload.promt_tokens", "did you mean prompt_tokens"]),
    "yaml syntax": (GOOD.replace("arms:", "arms:\n  - name: [unclosed"), ["YAML syntax error at line"]),
    "negative concurrency": (GOOD.replace("[1, 2]", "[1, -2]"), ["concurrency levels must be positive"]),
    "zero output": (GOOD.replace("output_tokens: 16", "output_tokens: 0"),
                    ["protocol.workload.output_tokens", "greater than 0"]),
    "override not declared": (GOOD.replace("engine: {kind: vllm_cpu}",
                                           "engine: {kind: vllm_cpu}\n    protocol_overrides: {context_length: 4096}"),
                              ["arms[1].protocol_overrides.context_length", "variables_under_test"]),
    "context too small": (GOOD.replace("output_tokens: 16", "output_tokens: 4000"),
                          ["context_length is 2048", "raise context_length"]),
    "missing model path": (GOOD.replace("name: t\n", "name: t\nmodel: {source: path, hf_path: no/such/dir}\n"),
                           ["model", "'no/such/dir' does not exist"]),
    "bad arm name": (GOOD.replace("name: b", "name: b c"), ["arms[1].name", "letters, digits"]),
    "not a mapping": ("- just\n- a list\n", ["must be a YAML mapping"]),
    "bad url": (GOOD.replace("engine: {kind: vllm_cpu}", "engine: {kind: openai_endpoint, base_url: api.example}"),
                ["base_url must start with http"]),
    "model context exceeded": (GOOD.replace("name: t\n", "name: t\nmodel: {max_context: 1024}\n"),
                               ["exceeds the model's max_context 1024"]),
    "unknown accelerator": (GOOD.replace("name: t\n", "name: t\nhardware: {accelerator: h100}\n"),
                            ["hardware.accelerator", "unknown accelerator 'h100'", "h100-sxm"]),
    "unknown catalog model": (GOOD.replace("name: t\n", "name: t\nmodel: {source: catalog, catalog: qwen3.8-72b}\n"),
                              ["catalog 'qwen3.8-72b' is not in the model catalog", "qwen3.8-27b"]),
    "catalog model with a sweep": (GOOD.replace("name: t\n",
                                                "name: t\nmodel: {source: catalog, catalog: qwen3.8-27b}\n"),
                                   ["has no weights to serve", "stages: [sizing]"]),
    "repetitions max below min": (GOOD.replace("  arrival:", "  repetitions: {min: 3, max: 2}\n  arrival:"),
                                  ["repetitions.max (2) is below repetitions.min (3)"]),
    "primary figure not compared": (GOOD.replace("  arrival:", "  decision: {metrics: [ttft_p50]}\n  arrival:"),
                                    ["decision.primary 'output_throughput' is not among decision.metrics"]),
    "unknown decoding preset": (GOOD.replace("  arrival:", "  decoding: {preset: creative}\n  arrival:"),
                                ["protocol.decoding.preset", "'greedy', 'instruct' or 'thinking'"]),
    "top_p above one": (GOOD.replace("  arrival:", "  decoding: {top_p: 1.5}\n  arrival:"),
                        ["protocol.decoding.top_p", "less than or equal to 1", "Fix: give a smaller value"]),
    "negative decoding seed": (GOOD.replace("  arrival:", "  decoding: {seed: -7}\n  arrival:"),
                               ["protocol.decoding.seed", "greater than or equal to 0 (got -7)",
                                "Fix: give a larger value"]),
    "negative repetition seed": (GOOD.replace("  arrival:", "  seeds: [3, -1]\n  arrival:"),
                                 ["protocol.seeds[1]", "greater than or equal to 0"]),
    "sweep without canaries": (GOOD.replace("  arrival:", "  stages: [sweep]\n  arrival:"),
                               ["would skip the sweep", "add canaries", "run_sweep_on_hold: true",
                                "'not gated'"]),
    "json check declared out of scope for a json workload": (
        GOOD.replace("output_tokens: 16}", "output_tokens: 16, response_format: json_schema}\n"
                     "  canaries: {out_of_scope: {json_schema: not needed}}"),
        ["canaries.out_of_scope declares ['json_schema'] out of scope, but the workload uses it",
         "remove ['json_schema'] from out_of_scope"]),
    "out-of-scope capability the suite lacks": (
        GOOD.replace("  arrival:", "  canaries: {out_of_scope: {tools: no tools}}\n  arrival:"),
        ["['tools'] is not a capability of suite 'embedded-smollm2'", "tool_calls"]),
    "out of scope without a reason": (
        GOOD.replace("  arrival:", "  canaries: {out_of_scope: {tool_calls: ''}}\n  arrival:"),
        ["out_of_scope ['tool_calls'] has no reason"]),
    "negative timeout": (GOOD.replace("  arrival:", "  request_timeout_s: -5\n  arrival:"),
                         ["protocol.request_timeout_s", "greater than 0"]),
    "arm without engine": (GOOD.replace("    engine: {kind: vllm_cpu}\n", ""), ["arms[1].engine", "Field required"]),
    "no arms": ("name: t\narms: []\n", ["arms", "at least 1 item"]),
    "negative rate": (GOOD.replace("{kind: closed_loop, concurrency: [1, 2]}", "{kind: poisson, rates: [1, -3]}"),
                      ["rates must be positive"]),
    "missing trace": (GOOD.replace("{kind: closed_loop, concurrency: [1, 2]}", "{kind: trace, path: no/trace.jsonl}"),
                      ["trace file 'no/trace.jsonl' does not exist"]),
    "engine option of another engine": (GOOD.replace("engine: {kind: llama_cpp}",
                                                     "engine: {kind: llama_cpp, kv_cache_gib: 2}"),
                                        ["arms[0].engine.kv_cache_gib", "Extra inputs are not permitted"]),
}


# The exact line for each problem whose hint comes from the schema's unions.
EXACT_LINES = {
    "arrival kind typo": (
        GOOD.replace("{kind: closed_loop, concurrency: [1, 2]}", "{kind: poison}"),
        "  - protocol.arrival.kind: unknown kind 'poison'. Fix: did you mean 'poisson'? "
        "kind is one of: closed_loop, constant, poisson, gamma, trace"),
    "bad bound of a tagged length": (
        GOOD.replace("prompt_tokens: 64", "prompt_tokens: {kind: lognormal, median: 40, sigma: 1, max: -5}"),
        "  - protocol.workload.prompt_tokens.max: Input should be greater than 0 (got -5). Fix: give a larger value"),
    "misspelled key of an open-loop arrival": (
        GOOD.replace("{kind: closed_loop, concurrency: [1, 2]}", "{kind: poisson, rate: [1]}"),
        "  - protocol.arrival.rate: Extra inputs are not permitted. Fix: did you mean rates? Otherwise remove it"),
    "engine kind typo": (
        GOOD.replace("kind: vllm_cpu", "kind: vlm"),
        "  - arms[1].engine.kind: unknown kind 'vlm'. Fix: did you mean 'vllm'? "
        f"kind is one of: {KINDS}"),
    "engine kind missing": (
        GOOD.replace("engine: {kind: vllm_cpu}", "engine: {port: 8000}"),
        f"  - arms[1].engine.kind: missing. Fix: add kind: one of {KINDS}"),
    "length kind typo": (
        GOOD.replace("output_tokens: 16", "output_tokens: {kind: lognorm, median: 8}"),
        "  - protocol.workload.output_tokens.kind: unknown kind 'lognorm'. Fix: did you mean 'lognormal'? "
        "kind is one of: fixed, uniform, normal, lognormal, empirical"),
    "option of another engine kind": (
        GOOD.replace("engine: {kind: llama_cpp}", "engine: {kind: llama_cpp, kv_cache_gib: 2}"),
        "  - arms[0].engine.kv_cache_gib: Extra inputs are not permitted (got 2). Fix: kv_cache_gib applies to "
        "kind vllm_cpu only; remove it or change the kind"),
    "burstiness of a poisson arrival": (
        GOOD.replace("{kind: closed_loop, concurrency: [1, 2]}", "{kind: poisson, rates: [1], burstiness: 2}"),
        "  - protocol.arrival: burstiness 2 has no effect on poisson arrivals; use kind: gamma to set it, "
        "or remove burstiness"),
    "length that is neither a number nor a mapping": (
        GOOD.replace("output_tokens: 16", "output_tokens: many"),
        "  - protocol.workload.output_tokens: Input should be a valid dictionary or object to extract fields from "
        "(got 'many'). Fix: give a mapping with kind: one of fixed, uniform, normal, lognormal, empirical"),
}


@pytest.mark.parametrize("case", sorted(EXACT_LINES))
def test_hints_come_from_the_unions(case, write_campaign):
    text, line = EXACT_LINES[case]
    with pytest.raises(CampaignError) as err:
        load_campaign(write_campaign(text))
    assert line in str(err.value).splitlines(), str(err.value)


class _Wheel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["wheel"]
    spokes: int


class _Track(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["track", "tread"]
    links: int


class _Vehicle(BaseModel):
    model_config = ConfigDict(extra="forbid")
    parts: dict[str, list[Annotated[Union[_Wheel, _Track], Field(discriminator="kind")]]]


def test_locations_and_kinds_follow_any_schema():
    """Unions defined anywhere are read the same way: tags from each member's Literal, dropped
    from the path, through mappings and lists."""
    place = locate(_Vehicle, ("parts", "front", 1, "tread", "links"))
    assert place.path == "parts.front[1].links" and place.kinds == ()
    union = locate(_Vehicle, ("parts", "front", 0))
    assert union.kinds == ("wheel", "track", "tread") and union.path == "parts.front[0]"
    member = locate(_Vehicle, ("parts", "front", 0, "wheel"))
    assert member.fields == ("kind", "spokes")
    assert member.fields_by_kind == {"wheel": ("kind", "spokes"), "track": ("kind", "links"),
                                           "tread": ("kind", "links")}
    with pytest.raises(ValidationError) as err:
        _Vehicle.model_validate({"parts": {"rear": [{"kind": "whel", "spokes": 3}]}})
    assert format_validation_error("v.yaml", err.value, _Vehicle).splitlines()[1] == (
        "  - parts.rear[0].kind: unknown kind 'whel'. Fix: did you mean 'wheel'? kind is one of: wheel, track, tread")


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_campaign_message(case, write_campaign):
    text, expected = BAD[case]
    path = write_campaign(text, name=f"{case.replace(' ', '_')}.yaml")
    with pytest.raises(CampaignError) as err:
        load_campaign(path)
    msg = str(err.value)
    assert str(path) in msg
    for piece in expected:
        assert piece in msg, f"{piece!r} not in:\n{msg}"


def test_at_least_twenty_kinds_of_bad_input_are_covered():
    assert len(BAD) + 2 >= 20  # plus the port in use and the missing file below


def test_port_in_use_is_refused(write_campaign):
    import socket
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        path = write_campaign(GOOD.replace("engine: {kind: llama_cpp}", f"engine: {{kind: llama_cpp, port: {port}}}"))
        with pytest.raises(CampaignError, match=f"port {port} is already in use"):
            load_campaign(path)


def test_missing_file_says_where_campaigns_live():
    with pytest.raises(CampaignError, match="campaigns/quickstart.yaml"):
        load_campaign("campaigns/nope.yaml")


def _engines_carrying(mark: str) -> set[int]:
    """Engine processes whose environment carries `mark`: those a command given it started (other
    tests may run engines at the same time)."""
    out = set()
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if "llama-server" in cmd or "vllm.entrypoints" in cmd:
            try:
                if p.environ().get("STACKBOOK_TEST_MARK") == mark:
                    out.add(p.info["pid"])
            except psutil.Error:
                continue
    return out


@pytest.mark.parametrize("case", ["unknown engine", "duplicate arm", "missing arms", "wrong type"])
def test_cli_refuses_bad_campaign_fast_and_starts_nothing(case, write_campaign, tmp_path):
    path = write_campaign(BAD[case][0])
    mark = f"{tmp_path.name}-{time.monotonic_ns()}"
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "stackbook.cli", "run", str(path)], capture_output=True, text=True,
                       env={**os.environ, "STACKBOOK_TEST_MARK": mark})
    assert r.returncode == 2
    assert time.monotonic() - t < 30
    assert str(path) in r.stderr
    assert "Fix" in r.stderr or "every arm needs its own name" in r.stderr
    assert _engines_carrying(mark) == set()
    assert not (tmp_path / "outputs").exists()


def test_a_sweep_without_canaries_runs_only_when_asked_and_is_labelled_not_gated(write_campaign):
    c = load_campaign(write_campaign(GOOD.replace(
        "  arrival:", "  stages: [sweep]\n  canaries: {run_sweep_on_hold: true}\n  arrival:")))
    assert c.protocol.stages == ["sweep"]
    from stackbook.evidence.label import arm_label
    assert str(arm_label(None, [False])) == "not gated"


def test_the_shipped_campaigns_gate_every_arm_alike():
    """Out of scope only what the free-text single-turn workloads do not use; JSON stays gating
    wherever every engine of the campaign constrains it."""
    quick = load_campaign("campaigns/quickstart.yaml").protocol.canaries.out_of_scope
    assert sorted(quick) == ["batch_invariance", "instruction_following", "multi_turn", "tool_calls"]
    four = load_campaign("campaigns/four-engines.yaml").protocol.canaries.out_of_scope
    assert sorted(four) == ["batch_invariance", "instruction_following", "json_schema", "multi_turn", "tool_calls"]


def test_cli_check_validates_without_running():
    r = subprocess.run([sys.executable, "-m", "stackbook.cli", "run", "--check", "campaigns/quickstart.yaml"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "valid campaign 'quickstart' with 2 arm(s)" in r.stdout
