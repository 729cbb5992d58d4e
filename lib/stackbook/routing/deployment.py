"""The runner's side of an arm with replicas: N processes of the arm's engine kind, each on its own
port with the engine's own threads, started together; each must answer its health check before
the router starts, and the router must route to every one before anything is measured. Stopping
stops the router and the replicas this deployment started, nothing else.

On the 2-core host the deployment is sized for, two llama.cpp replicas of one thread each take a
core apiece while they compute; the router and the load generator have no core of their own and
run in the gaps (their CPU seconds per point are read beside the replicas', by process role)."""
from __future__ import annotations

import time
from pathlib import Path

import httpx

from stackbook.engines import EngineStartError, adapter_for
from stackbook.engines.spec import free_port
from stackbook.evidence.files import write_json_atomic
from stackbook.locations import symbolic
from stackbook.routing.figures import added_latency
from stackbook.routing.registry import router_class
from stackbook.routing.router_kind import RouterStartError

PROBE_REQUESTS = 8  # each way, for the router's added time


def replica_log(engine_log: Path | None, index: int) -> Path | None:
    """Replica 0 writes the arm's engine log (what reads one engine's log reads it); replica i its own."""
    if engine_log is None or index == 0:
        return engine_log
    return engine_log.with_name(f"{engine_log.stem}-replica{index}{engine_log.suffix}")


def router_log(engine_log: Path | None) -> Path | None:
    return engine_log.with_name("router.log") if engine_log else None


class Deployment:
    """Replicas of one arm's engine behind its router, started, watched and stopped as one; it
    stands where one engine's adapter stands in the arm's slot (start, wait_ready, stop, is_alive,
    base_url, proc, ready_after_s)."""

    def __init__(self, campaign, arm, log_path: str | Path | None = None):
        self.arm = arm
        log = Path(log_path) if log_path else None
        self.replicas = [adapter_for(campaign, arm, log_path=replica_log(log, i)) for i in range(arm.replicas)]
        taken: set[int] = set()
        for r in self.replicas:  # free ports picked one after another can repeat: each replica its own
            while r.port in taken:
                r.port = free_port(arm.engine.host)
            taken.add(r.port)
        self.router = router_class(arm.router.kind)(arm.router, [r.base_url for r in self.replicas],
                                                    arm.engine.host, router_log(log))
        self.ready_after_s: float | None = None
        self.added_latency: dict | None = None
        self._started: float | None = None

    @property
    def kind(self) -> str:
        return self.replicas[0].kind

    @property
    def base_url(self) -> str:
        return self.router.base_url or self.replicas[0].base_url

    @property
    def proc(self):
        """The process whose end ends the deployment for the client: the router's, else replica 0's."""
        return self.router.process.proc if self.router.runs_process else self.replicas[0].proc

    def start(self) -> "Deployment":
        self._started = time.monotonic()
        for r in self.replicas:
            r.start()
        return self

    def wait_ready(self) -> float:
        """Each replica healthy, then the router started and routing to all of them; anything that
        fails stops everything started and says which part failed and why."""
        n = len(self.replicas)
        for i, r in enumerate(self.replicas):
            try:
                r.wait_ready()
            except EngineStartError as err:
                self.stop()
                raise EngineStartError(f"replica {i} of {n} ({r.base_url}) did not become ready: {err}") from None
        try:
            self.router.start()
            self.router.wait_ready()
        except (RouterStartError, FileNotFoundError, OSError) as err:
            self.stop()
            raise RouterStartError(f"router {self.router.kind} in front of {n} replicas could not start: "
                                   f"{err}") from None
        self.ready_after_s = time.monotonic() - (self._started or time.monotonic())
        if self.router.runs_process:
            self.added_latency = self.probe_added_latency()
        return self.ready_after_s

    def probe_added_latency(self, n: int = PROBE_REQUESTS) -> dict | None:
        """The same one-token request sent alternately to replica 0 and through the router, idle."""
        r0 = self.replicas[0]
        body = {"model": r0.served_name, "messages": [{"role": "user", "content": "Say yes."}], "stream": False,
                **r0.output_length_fields(1)}
        direct, routed = [], []
        try:
            with httpx.Client(timeout=30.0, headers=r0.headers()) as client:
                for _ in range(n):
                    for url, out in ((r0.base_url, direct), (self.router.base_url, routed)):
                        t = time.perf_counter()
                        client.post(url + "/v1/chat/completions", json=body).raise_for_status()
                        out.append(time.perf_counter() - t)
        except httpx.HTTPError as err:
            return {"not_measured": f"a probe request failed ({err})"}
        return added_latency(direct, routed)

    def is_alive(self) -> bool:
        """The client can still be answered: the router runs and at least one replica does."""
        return self.router.is_alive() and any(r.is_alive() for r in self.replicas)

    def stop(self, grace_s: float = 20.0) -> int | None:
        """Stop the router, then every replica this deployment started; replica 0's exit code."""
        self.router.stop()
        codes = [r.stop(grace_s) for r in self.replicas]
        return codes[0]

    def describe(self) -> dict:
        """The deployment as engine.json keeps it: what a notebook needs to reach and read each part."""
        return {"replicas": [{"index": i, "base_url": r.base_url, "pid": r.proc.pid if r.proc else None,
                              "ready_after_s": r.ready_after_s, "log": symbolic(str(r.log_path)) if r.log_path
                              else None,
                              "launch": r.launch_record()} for i, r in enumerate(self.replicas)],
                "router": self.router.record(), "router_added_latency": self.added_latency,
                "threads_per_replica": getattr(self.arm.engine, "threads", None),
                "ready_after_s": self.ready_after_s}

    def record(self, arm_dir, engine: dict) -> dict:
        """engine.json: replica 0's record (`engine`: every replica runs the same kind, weights and
        settings), with the address the client talks to, the process it watches and the deployment."""
        info = engine | {"base_url": self.base_url, "pid": self.proc.pid if self.proc else None,
                         "deployment": self.describe()}
        write_json_atomic(arm_dir.engine_json, info)
        return info


def serving_for(campaign, arm, log_path=None):
    """What serves an arm: its engine's adapter, or a Deployment of its replicas behind its router."""
    if arm.router is None:
        return adapter_for(campaign, arm, log_path=log_path)
    return Deployment(campaign, arm, log_path)
