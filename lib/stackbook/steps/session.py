"""What a notebook needs about its arm: the campaign, the protocol, where to write, and an
endpoint (given by the runner, or started here when the notebook is opened on its own)."""
from __future__ import annotations

import atexit
import os
import time
from dataclasses import dataclass, field

import psutil

from stackbook.config.campaign import Arm, Campaign
from stackbook.config.loading import load_campaign
from stackbook.config.protocol import Protocol
from stackbook.engines import EngineAdapter, adapter_for
from stackbook.evidence.files import read_json, write_json_atomic
from stackbook.evidence.run_lock import stop_with_parent
from stackbook.evidence.rundir import ArmDir, RunDir
from stackbook.host import host_identity
from stackbook.loadgen.drivers import Target
from stackbook.locations import REPO_ROOT
from stackbook.routing.deployment import Deployment
from stackbook.routing.routed import RoutedDeployment


def record_engine(adapter: EngineAdapter, arm_dir: ArmDir, restarts: int = 0, relay=None) -> dict:
    """engine.json: who served the arm and what capacity the engine itself reported, and the
    harness's delay relay when a known-effect arm is reached through one."""
    info = {
        "kind": adapter.kind,
        "base_url": adapter.base_url,
        "listens": {"host": adapter.spec.host, "exposed": adapter.spec.expose or "no: loopback only"},
        "remote": adapter.remote,
        "pid": adapter.proc.pid if adapter.proc else None,
        "ready_after_s": adapter.ready_after_s,
        "model": adapter.artifacts.identity() if adapter.artifacts else {"name": adapter.served_name},
        "identity": adapter.identity(),
        "build_line": adapter.build_line() or "not in the engine's log",
        "kernel_choice": adapter.kernel_choice() or {"unknown": "the engine reports no kernel choice"},
        "speculative_decoding": adapter.spec.speculative_decoding(),
        "launch": adapter.launch_record(),
        "configured_capacity": adapter.spec.configured_capacity(adapter.protocol),
        "realized_capacity": adapter.realized_capacity(),
        "decoding_fields": adapter.honoured_decoding_fields(adapter.protocol.decoding.resolved()),
        "host": host_identity(),
        "restarts": restarts,
        "known_delay": relay.record() if relay else None,
        "recorded_unix": time.time(),
    }
    write_json_atomic(arm_dir.engine_json, info)
    return info


@dataclass
class ArmSession:
    campaign: Campaign
    arm: Arm
    protocol: Protocol
    run_dir: RunDir
    arm_dir: ArmDir
    adapter: EngineAdapter
    started_here: bool = False
    engine: dict = field(default_factory=dict)
    routing: RoutedDeployment | None = None  # replicas behind a router (routing/), else None
    deployment: Deployment | None = None  # the replicas this notebook started itself, when it did

    def target(self) -> Target:
        d = self.protocol.decoding.resolved()
        target = Target(self.adapter.base_url, self.adapter.served_name,
                        self.adapter.sampling_fields(d) | self.protocol.decoding.template_fields()
                        | self.adapter.prefix_cache_fields(self.protocol.prefix_cache),
                        self.adapter.output_length_fields(self.protocol.workload.output_tokens.bounds()[1]),
                        self.adapter.headers(), self.protocol.request_timeout_s, **self.adapter.request_route(),
                        exact_lengths=self.adapter.length_control is not None,
                        private=self.protocol.arrival.content_is_private())
        return self.routing.route(target) if self.routing else target

    def engine_alive(self) -> bool:
        """Whether the engine serving this arm still runs (started here, or by the runner); for
        replicas behind a router, whether the router and at least one replica do."""
        if self.routing is not None:
            return self.routing.alive()
        if self.adapter.proc is not None:
            return self.adapter.is_alive()
        pid = (self.engine or {}).get("pid")
        if not pid:
            return True
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    def harness_ceiling(self) -> dict | None:
        """The harness ceiling the runner measured at campaign start (the run's manifest), if any."""
        return (read_json(self.run_dir.manifest, {}) or {}).get("harness_ceiling")

    def describe(self) -> str:
        where = (f"endpoint `{self.adapter.base_url}`" if self.engine or self.started_here
                 else "no engine: arithmetic only")
        return (f"**Campaign** `{self.campaign.name}` · **arm** `{self.arm.name}` ({self.arm.engine.kind}) · "
                f"{where}")

    def close(self) -> None:
        if self.deployment is not None:
            self.deployment.stop()
            self.deployment = None
        if self.started_here:
            self.adapter.stop()
            self.started_here = False


def open_arm(campaign_file: str, run_dir: str | None = None, arm: str | None = None,
             endpoint: str | None = None, start_engine: bool = True) -> ArmSession:
    """Open one arm for a notebook. Without an endpoint the arm's engine is started here and
    stopped when the kernel exits, so a notebook also runs on its own in JupyterLab."""
    os.chdir(REPO_ROOT)  # every path in a record is relative to the repository root
    campaign = load_campaign(campaign_file)
    chosen = campaign.arm(arm) if arm else campaign.arms[0]
    run = RunDir(run_dir) if run_dir is not None else RunDir.interactive(campaign.name)
    arm_dir = run.arm(chosen.name).create()
    log_path = arm_dir.engine_log if endpoint is None and start_engine else None
    adapter = adapter_for(campaign, chosen, log_path=log_path)
    session = ArmSession(campaign, chosen, campaign.protocol_for(chosen), run, arm_dir, adapter)
    if endpoint is None and start_engine and chosen.router is not None:  # replicas, started here as the runner would
        session.deployment = Deployment(campaign, chosen, arm_dir.engine_log).start()
        atexit.register(session.close)
        session.deployment.wait_ready()
        session.deployment.record(arm_dir, record_engine(session.deployment.replicas[0], arm_dir))
        adapter.attach(session.deployment.base_url)
        session.engine = read_json(arm_dir.engine_json, {}) or {}
        session.routing = RoutedDeployment.from_engine_record(session.engine, campaign, chosen)
    elif endpoint is not None:  # the runner's kernel: it writes the run only while the runner lives
        stop_with_parent()
        adapter.attach(endpoint)
        session.engine = read_json(arm_dir.engine_json, {}) or {}
        adapter.restore(session.engine)
        session.routing = RoutedDeployment.from_engine_record(session.engine, campaign, chosen)
    elif start_engine:
        adapter.start()
        adapter.wait_ready()
        session.started_here = True
        atexit.register(session.close)
        session.engine = record_engine(adapter, arm_dir)
    return session
