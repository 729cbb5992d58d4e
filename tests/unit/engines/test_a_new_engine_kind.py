"""A new engine kind needs its own module and one registry line, nothing else: a kind defined
here (its spec and adapter, serving through the harness's calibration server as its engine
process) is registered, checked as a campaign, sized, swept and analysed by the library as it is."""
from __future__ import annotations

import sys
from typing import ClassVar, Literal

import pytest
from pydantic import Field
from typer.testing import CliRunner

from stackbook.engines import registry
from stackbook.engines.base import EngineAdapter
from stackbook.engines.facts import MetricSeries, ProcessRole
from stackbook.engines.spec import CapacityBasis, EngineSpec

KIND = "calibration_probe"


class ProbeEngine(EngineSpec):
    """The campaign's mapping for the probe: how many requests it serves at once."""
    kind: Literal["calibration_probe"]
    serves_local_weights: ClassVar[bool] = False
    slots: int = Field(4, gt=0)

    def configured_capacity(self, protocol) -> dict:
        return {"slots": self.slots, "context_per_sequence": protocol.context_length}

    def sequences_at_once(self) -> int:
        return self.slots

    def predicted_capacity(self, basis: CapacityBasis) -> dict:
        return {"max_concurrency": self.slots, "kv_tokens": self.slots * basis.protocol.context_length,
                "rule": "one sequence per slot, each the protocol's context"}


class ProbeAdapter(EngineAdapter):
    """Serves with the calibration server, started as the engine process."""
    spec_model = ProbeEngine
    installs = "nothing: the harness's calibration server"
    process_roles = (ProcessRole(pattern=r"stackbook\.harness\.calibration_server", role="probe_server",
                                 centre="compute", serves_http=True),)
    metric_series = MetricSeries(kept=("calibration_",), gauges=("calibration:num_requests_running",),
                                 batch_gauges=("calibration:num_requests_running",),
                                 generated_token_counters=("calibration_generation_tokens_total",))

    def command(self) -> list[str]:
        return [sys.executable, "-m", "stackbook.harness.calibration_server", "--host", self.spec.host,
                "--port", str(self.port)]

    def identity(self) -> dict:
        return {"engine": KIND, "version": "0"}

    def realized_capacity(self) -> dict:
        return {"source": "configured", "slots": self.spec.slots}


@pytest.fixture
def probe_kind():
    registry.register(ProbeAdapter)
    try:
        yield ProbeAdapter
    finally:
        registry.unregister(KIND)


SWEEP = """
name: probe
model: {name: calibration, source: remote}
protocol:
  stages: [sweep]
  canaries: {run_sweep_on_hold: true}
  workload: {kind: synthetic, prompt_tokens: 16, output_tokens: 4}
  arrival: {kind: closed_loop, concurrency: [1]}
  context_length: 512
  requests_per_point: 4
  repetitions: 1
  warmup_requests: 1
arms:
  - name: probe
    engine: {kind: calibration_probe, slots: 2}
"""

SIZING = """
name: probe-sizing
model: {name: qwen3.8-27b, source: catalog, catalog: qwen3.8-27b}
hardware: {accelerator: a100-80gb, pool_gib: 23.3}
protocol:
  stages: [sizing]
  precision: {weights: bf16, kv_cache: bf16, state: fp32}
  workload: {kind: synthetic, prompt_tokens: 1024, output_tokens: 512}
  context_length: 8192
arms:
  - name: probe
    engine: {kind: calibration_probe, slots: 3}
"""


def test_the_kind_is_unknown_until_registered_and_gone_after(tmp_path):
    from stackbook.config.errors import CampaignError
    from stackbook.config.loading import load_campaign
    path = tmp_path / "c.yaml"
    path.write_text(SWEEP)
    with pytest.raises(CampaignError, match="calibration_probe"):
        load_campaign(path)
    registry.register(ProbeAdapter)
    try:
        assert load_campaign(path).arms[0].engine.slots == 2
        assert KIND in registry.engine_kinds() and "probe_server" in {r.role for r in registry.process_roles()}
    finally:
        registry.unregister(KIND)
    with pytest.raises(CampaignError):
        load_campaign(path)
    assert KIND not in registry.engine_kinds()


def test_the_campaign_check_accepts_the_new_kind(probe_kind, tmp_path):
    from stackbook.cli import app
    path = tmp_path / "c.yaml"
    path.write_text(SWEEP)
    result = CliRunner().invoke(app, ["run", str(path), "--check"])
    assert result.exit_code == 0, result.output
    assert f"valid campaign 'probe' with 1 arm(s): probe ({KIND})" in result.output


def test_sizing_applies_the_new_kinds_capacity_rule(probe_kind, tmp_path):
    from stackbook.steps.session import open_arm
    from stackbook.steps.sizing import arm_sizing
    path = tmp_path / "c.yaml"
    path.write_text(SIZING)
    session = open_arm(str(path), run_dir=str(tmp_path / "run"), start_engine=False)
    try:
        out = arm_sizing(session)
    finally:
        session.close()
    assert out["predicted_capacity"] == {"max_concurrency": 3, "kv_tokens": 3 * 8192,
                                         "rule": "one sequence per slot, each the protocol's context"}
    assert out["geometry"]["name"] and out["cache_pool_bytes"] == pytest.approx(23.3 * 2**30)


def test_a_sweep_and_its_analysis_run_on_the_new_kind(probe_kind, tmp_path):
    from stackbook.analysis import comparison, verdict
    from stackbook.evidence.rundir import RunDir
    from stackbook.loadgen.records import read_records
    from stackbook.steps.session import open_arm
    from stackbook.steps.sweep import arm_sweep
    path = tmp_path / "c.yaml"
    path.write_text(SWEEP)
    session = open_arm(str(path), run_dir=str(tmp_path / "run"), start_engine=True)
    try:
        out = arm_sweep(session, progress=False)
    finally:
        session.close()
    point = out["points"]["c1-r0"]
    measured = [r for r in read_records(session.arm_dir.requests) if r.phase == "measure"]
    assert len(measured) == 4 and all(r.ok for r in measured)
    assert list(point["cpu_seconds"]["engine"]) == ["probe_server"]  # its process known by the role it declares
    assert point["batch_size_mean"] is None or 0 <= point["batch_size_mean"] <= 1
    assert point["work_tokens"]["generated_tokens"] >= 4 * 4

    run = RunDir(tmp_path / "run")
    if not run.campaign_resolved.exists():
        run.campaign_resolved.write_text(path.read_text())
    campaign, arms = comparison.load_run(run)
    assert list(arms) == ["probe"] and arms["probe"]["engine"]["identity"]["engine"] == KIND
    fair = comparison.fairness_table(campaign, arms)
    frame = comparison.comparison_frame(arms, fair)
    table = verdict.load_table(frame, verdict.verdict_confidence(campaign.protocol))
    assert list(frame["arm"]) == ["probe"] and list(frame["point"]) == ["c1-r0"] and list(frame["requests"]) == [4]
    row = table.reset_index().to_dict("records")
    assert len(row) == 1 and (row[0]["arm"], row[0]["load"], row[0]["requests"]) == ("probe", 1, 4)
    assert row[0]["output_throughput"] > 0 and row[0]["e2e_p50"] > 0
