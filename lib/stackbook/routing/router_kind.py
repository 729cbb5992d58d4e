"""What a router kind is: the process it runs in front of the replicas (or none, where the client
itself spreads the load), when it is ready to route to every replica, and what its own metrics
say about each replica. A kind is one module (routing/<kind>.py) listed in routing/registry.py."""
from __future__ import annotations

import time
from pathlib import Path
from typing import ClassVar

import httpx

from stackbook.engines.base import EngineStartError
from stackbook.engines.engine_process import EngineProcess
from stackbook.engines.facts import ProcessRole
from stackbook.engines.spec import free_port
from stackbook.locations import cache_dir, symbolic
from stackbook.routing.spec import RouterSpec


class RouterStartError(EngineStartError):
    """The router did not start, or did not see every replica; the message carries its log's end."""


class RouterKind:
    """One router in front of one arm's replicas. A subclass names its `spec_model`; its `kind`
    follows from it."""
    spec_model: ClassVar[type[RouterSpec]]
    kind: ClassVar[str] = "base"
    runs_process: ClassVar[bool] = True  # False: the client spreads the load itself
    installs: ClassVar[str] = ""  # what set-up installs for it, in words
    env_name: ClassVar[str] = ""  # its environment's folder under $STACKBOOK_CACHE/routers
    process_roles: ClassVar[tuple[ProcessRole, ...]] = ()
    # Where each replica's share of the requests is read: the router's own counts, or the client's.
    shares_source: ClassVar[str] = ""
    # What the router does to a request body on its way to a replica (nothing: sent on unchanged).
    dialect: ClassVar[str] = "requests reach the replicas as the client wrote them"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "spec_model" in cls.__dict__:
            cls.kind = cls.spec_model.kind_name()

    def __init__(self, spec: RouterSpec, replica_urls: list[str], host: str = "127.0.0.1",
                 log_path: str | Path | None = None):
        self.spec = spec
        self.replica_urls = list(replica_urls)
        self.host = host
        self.process = EngineProcess(Path(log_path) if log_path else None)
        self.port = free_port(host) if self.runs_process else None
        self.metrics_port = free_port(host) if self.runs_process else None
        self.ready_after_s: float | None = None

    # -- install ----------------------------------------------------------------------------
    @classmethod
    def install_dir(cls) -> Path:
        return cache_dir() / "routers" / cls.env_name

    @classmethod
    def installed_python(cls) -> Path:
        return cls.install_dir() / "bin" / "python"

    @classmethod
    def is_installed(cls) -> bool:
        return not cls.runs_process or (cls.install_dir() / ".installed").is_file()

    @classmethod
    def install_hint(cls) -> str:
        return (f"router kind {cls.kind!r}: {symbolic(cls.install_dir())} is missing; run `tools/bootstrap.sh router` "
                f"(or `make test`'s set-up) to install {cls.installs}")

    @classmethod
    def install(cls, ctx) -> None:
        """Install this kind into the cache (set-up's router step)."""

    # -- the process ----------------------------------------------------------------------
    @property
    def base_url(self) -> str | None:
        """Where the client sends its requests; None where the client picks a replica itself."""
        return f"http://{self.host}:{self.port}" if self.runs_process else None

    @property
    def metrics_url(self) -> str | None:
        return None

    def command(self) -> list[str]:
        raise NotImplementedError

    def ready(self, client: httpx.Client) -> bool:
        """Whether the router answers and routes to every replica."""
        return True

    def start(self) -> "RouterKind":
        if self.runs_process:
            if not self.is_installed():
                raise FileNotFoundError(self.install_hint())
            self.process.start(self.command(), {}, None)
        return self

    def wait_ready(self) -> float:
        started = time.monotonic()
        deadline = started + self.spec.startup_timeout_s
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                code = self.process.exited() if self.runs_process else None
                if code is not None:
                    raise RouterStartError(f"router {self.kind} exited with code {code} before it was ready. "
                                           f"Last log lines:\n{self.process.log_tail()}")
                try:
                    if self.ready(client):
                        self.ready_after_s = time.monotonic() - (self.process.started_at or started)
                        return self.ready_after_s
                except httpx.HTTPError:
                    pass
                time.sleep(0.25)
        self.stop()
        raise RouterStartError(f"router {self.kind} did not route to all {len(self.replica_urls)} replicas within "
                               f"{self.spec.startup_timeout_s:g} s (raise router.startup_timeout_s if it is just "
                               f"slow). Last log lines:\n{self.process.log_tail()}")

    def is_alive(self) -> bool:
        return self.process.is_alive() if self.runs_process else True

    def stop(self, grace_s: float = 10.0) -> int | None:
        return self.process.stop(grace_s) if self.runs_process else None

    @property
    def pid(self) -> int | None:
        return self.process.proc.pid if self.process.proc else None

    def record(self) -> dict:
        """The router as engine.json keeps it: what a notebook needs to read it, and its launch."""
        return {"kind": self.kind, "policy": getattr(self.spec, "policy", None), "settings": self.spec.model_dump(),
                "url": self.base_url, "metrics_url": self.metrics_url, "pid": self.pid,
                "command": [symbolic(c) for c in self.command()] if self.runs_process else None,
                "ready_after_s": self.ready_after_s, "shares_source": self.shares_source, "dialect": self.dialect,
                "version": self.version()}

    def version(self) -> str | None:
        return None

    # -- what the client and the readings need (from a record: no process needed) ----------
    @classmethod
    def route(cls, target, replica_urls: list[str]):
        """The load generator's target for this kind: the router's address, as given."""
        return target

    @classmethod
    def served_by_worker(cls, delta: dict, replica_urls: list[str]) -> list[float] | None:
        """Requests each replica answered during a point, by the router's own counts (None where
        the router keeps none)."""
        return None

    @classmethod
    def router_counts(cls, delta: dict) -> dict:
        """The router's own counts over a point: retries, failures per replica, status codes."""
        return {}
