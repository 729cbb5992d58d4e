"""The engine adapter: one engine kind, assembled from four concerns, each in its own module and
each with a small declared interface:
  facts           engines/facts.py            what the kind states about itself (EngineKindFacts);
  install recipe  engines/install_recipe.py   how set-up installs it (InstallRecipe);
  request dialect engines/request_dialect.py  how its requests are written (RequestDialect);
  process handle  engines/engine_process.py   its OS process and log (EngineProcess, held, not inherited).
What stays here is what ties them to one arm: the launch command, readiness over HTTP, stopping."""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import ClassVar
from urllib.parse import urlparse

import httpx

from stackbook.engines.engine_process import EngineProcess
from stackbook.engines.facts import EngineKindFacts
from stackbook.engines.install_recipe import InstallRecipe
from stackbook.engines.request_dialect import RequestDialect
from stackbook.engines.spec import EngineSpec, PythonEngineSpec, free_port
from stackbook.locations import cache_dir, symbolic

ANSI = re.compile(r"\x1b\[[0-9;]*m")  # colour codes some engines write into their log


class EngineStartError(RuntimeError):
    """The engine did not become ready; the message carries the end of its log."""


class EngineAdapter(RequestDialect, InstallRecipe, EngineKindFacts):
    """Runs one engine kind for one arm. A subclass names its `spec_model`; its `kind` follows
    from it, and it states its kind's facts, install and dialect as class attributes."""
    spec_model: ClassVar[type[EngineSpec]]
    kind: ClassVar[str] = "base"
    health_path = "/health"
    metrics_path: str | None = "/metrics"
    remote = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "spec_model" in cls.__dict__:
            cls.kind = cls.spec_model.kind_name()

    def __init__(self, spec, artifacts, protocol, served_name: str, log_path: str | os.PathLike | None = None):
        self.spec = spec
        self.artifacts = artifacts
        self.protocol = protocol
        self.served_name = served_name
        self.process = EngineProcess(Path(log_path) if log_path else None)
        self.port = spec.port or free_port(spec.host)
        self.ready_after_s: float | None = None

    # -- the process handle's state, read where the adapter is ------------------------------
    @property
    def log_path(self) -> Path | None:
        return self.process.log_path

    @property
    def proc(self):
        return self.process.proc

    @property
    def log_lines(self) -> list[str]:
        return self.process.log_lines

    @log_lines.setter
    def log_lines(self, lines: list[str]) -> None:
        self.process.log_lines = lines

    @property
    def started_at(self) -> float | None:
        return self.process.started_at

    @started_at.setter
    def started_at(self, t: float | None) -> None:
        self.process.started_at = t

    @property
    def exit_code(self) -> int | None:
        return self.process.exit_code

    # -- what differs per engine -------------------------------------------------------
    def command(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return {}

    def cwd(self) -> Path | None:
        """The folder the engine starts in (None: the workbook's own)."""
        return None

    def identity(self) -> dict:
        raise NotImplementedError

    def realized_capacity(self) -> dict:
        """Capacity as the engine itself reports it (log lines, HTTP), never as configured."""
        return {}

    def build_line(self) -> str | None:
        """The engine's own statement of its build (what it was compiled for), from its log;
        None when it prints none."""
        return None

    def kernel_choice(self) -> dict:
        """The kernels the engine chose at start (backend, instruction set), as it reports them;
        empty when it reports none."""
        return {}

    # -- shared mechanics ----------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://{self.spec.host}:{self.port}"

    def attach(self, endpoint: str) -> None:
        """Talk to an engine of this arm that is already serving at `endpoint` (the runner
        started it) instead of one started here."""
        self.port = urlparse(endpoint).port

    def launch_record(self) -> dict:
        """The launch as it goes into the passport: command and environment, paths symbolic."""
        return {"command": [symbolic(c) for c in self.command()],
                "env": {k: symbolic(v) for k, v in self.env().items()}}

    def start(self) -> "EngineAdapter":
        self.process.start(self.command(), self.env(), self.cwd())
        return self

    def wait_ready(self, timeout_s: float | None = None) -> float:
        timeout_s = timeout_s or self.spec.startup_timeout_s
        deadline = time.monotonic() + timeout_s
        with self.http_client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                code = self.process.exited()
                if code is not None:
                    raise EngineStartError(f"{self.kind} exited with code {code} before "
                                           f"it was ready. Last log lines:\n{self.log_tail()}")
                try:
                    r = client.get(self.base_url + self.health_path, headers=self.headers())
                    if r.status_code in (401, 403):
                        # A refused credential does not fix itself: waiting would only hide the reason.
                        self.stop()
                        raise EngineStartError(
                            f"{self.kind} refused the credentials with HTTP {r.status_code} at "
                            f"{self.base_url}{self.health_path}: {r.text[:300]}; check the key in the variable "
                            "engine.api_key_env names and the auth header the endpoint expects")
                    if r.status_code == 200 and self._ready_extra(client):
                        self.ready_after_s = time.monotonic() - (self.started_at or time.monotonic())
                        return self.ready_after_s
                except httpx.ConnectError as err:
                    if "CERTIFICATE_VERIFY_FAILED" in str(err):
                        self.stop()
                        raise EngineStartError(
                            f"TLS: {self.base_url} presented a certificate that was not verified ({err}); if it is "
                            "signed by a private CA, give that CA's PEM file as engine.ca_bundle") from err
                except httpx.HTTPError:
                    pass
                time.sleep(0.25)
        self.stop()
        raise EngineStartError(f"{self.kind} was not ready within {timeout_s:.0f} s (raise "
                               f"engine.startup_timeout_s if it is just slow). Last log lines:\n{self.log_tail()}")

    def _ready_extra(self, client: httpx.Client) -> bool:
        return True

    def http_client(self, timeout: float = 10.0) -> httpx.Client:
        """The client readiness checks, probes and scrapes use to reach this engine."""
        return httpx.Client(timeout=timeout)

    def restore(self, engine_record: dict) -> None:
        """Take back what readiness found (engine.json) when attaching to an engine started elsewhere."""

    def is_alive(self) -> bool:
        return self.process.is_alive()

    def stop(self, grace_s: float = 20.0) -> int | None:
        """SIGTERM the engine's process group, SIGKILL what is left after the grace period."""
        return self.process.stop(grace_s)

    def log_tail(self, n: int = 25) -> str:
        return self.process.log_tail(n)

    def find_in_log(self, pattern: str, flags=0) -> re.Match | None:
        return self.process.find_in_log(pattern, flags)

    def __enter__(self) -> "EngineAdapter":
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class PythonEngineAdapter(EngineAdapter):
    """An engine that runs from a Python environment of its own: the interpreter the campaign
    names (engine.python), else the environment tools/bootstrap.sh makes in the cache, so the
    engine never needs installing into the workbook's environment."""
    spec_model: ClassVar[type[PythonEngineSpec]]
    env_name: ClassVar[str] = ""  # its folder under $STACKBOOK_CACHE/engines

    @classmethod
    def install_dir(cls) -> Path:
        return cache_dir() / "engines" / cls.env_name

    @classmethod
    def installed_executable(cls) -> Path:
        return cls.install_dir() / "bin" / "python"

    @property
    def python(self) -> str:
        """The interpreter that runs the engine; a missing one is named with the way to install it."""
        if self.spec.python:
            if not Path(self.spec.python).exists():
                raise FileNotFoundError(f"engine.python {self.spec.python!r} does not exist; give the interpreter of "
                                        f"an environment with {self.kind} installed, or leave python unset to use "
                                        f"the one `make {self.setup_target}` installs")
            return self.spec.python
        if not self.installed_executable().exists():
            raise FileNotFoundError(self.install_hint())
        return str(self.installed_executable())

    def package_versions(self, *distributions: str) -> dict[str, str]:
        """Installed versions of the engine's packages, read by its own interpreter."""
        code = ("import importlib.metadata as m, sys\n"
                "for d in sys.argv[1:]:\n"
                "    try: print(d, m.version(d))\n"
                "    except m.PackageNotFoundError: print(d, 'not-installed')")
        try:
            out = subprocess.run([self.python, "-c", code, *distributions], capture_output=True, text=True,
                                 timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired, FileNotFoundError):
            out = ""
        found = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
        return {d: found.get(d, "unknown") for d in distributions}

    @classmethod
    def is_installed(cls) -> bool:
        return (cls.install_dir() / ".installed").is_file()


def dtype_flag(kind: str, field: str, value: str, names: dict[str, str], weights: str) -> str:
    """The engine's name for a precision the protocol fixes (KV cache, recurrent state); "auto"
    (the checkpoint's dtype) where the engine has no name of its own and the precision equals the
    weights'. Anything else is refused: the launch must match what the sizing assumed."""
    if value in names:
        return names[value]
    if value == weights:
        return "auto"
    raise ValueError(f"{kind} has no setting for protocol.precision.{field}={value!r}; use one of "
                     f"{sorted(names)} or the weights' precision {weights!r}")


def chat_template_sha256(hf_dir: Path | None) -> str | None:
    """The sha256 of the chat template a Hugging Face directory carries (chat_template.jinja, else
    tokenizer_config.json's chat_template); None when it has none."""
    template = None
    if hf_dir is not None:
        jinja, tc = hf_dir / "chat_template.jinja", hf_dir / "tokenizer_config.json"
        if jinja.exists():
            template = jinja.read_text()
        elif tc.exists():
            template = json.loads(tc.read_text()).get("chat_template")
    return hashlib.sha256(template.encode()).hexdigest() if template else None
