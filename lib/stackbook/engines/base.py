"""What every engine adapter does: launch, wait until ready, capture its log, stop it; and what
each kind's adapter states about itself (its spec model, its install in the cache)."""
from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import ClassVar
from urllib.parse import urlparse

import httpx

from stackbook.engines.facts import EngineKindFacts
from stackbook.engines.process_group import die_with_parent, group_alive, signal_group
from stackbook.engines.spec import EngineSpec, PythonEngineSpec, free_port
from stackbook.locations import cache_dir, symbolic

ANSI = re.compile(r"\x1b\[[0-9;]*m")  # colour codes some engines write into their log


def _close_quietly(f) -> None:
    try:
        f.close()
    except OSError:
        pass  # what could not be flushed is still in the adapter's log_lines


class EngineStartError(RuntimeError):
    """The engine did not become ready; the message carries the end of its log."""


class EngineAdapter(EngineKindFacts):
    """Runs one engine kind. A subclass names its `spec_model`; its `kind` follows from it, and it
    states its kind's facts (engines/facts.py) as class attributes."""
    spec_model: ClassVar[type[EngineSpec]]
    kind: ClassVar[str] = "base"
    health_path = "/health"
    metrics_path: str | None = "/metrics"
    remote = False
    # How output_length_fields() makes the engine emit exactly the requested tokens; None where it
    # cannot, and then the passport says output lengths were not controlled.
    length_control: ClassVar[str | None] = None
    # Install facts: what to install, and the tools/bootstrap.sh step for kinds it installs.
    installs: ClassVar[str] = ""
    bootstrap_step: ClassVar[str | None] = None
    setup_target: ClassVar[str] = "quickstart"  # the make target whose set-up runs bootstrap_step
    pinned_version: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "spec_model" in cls.__dict__:
            cls.kind = cls.spec_model.kind_name()

    def __init__(self, spec, artifacts, protocol, served_name: str, log_path: str | os.PathLike | None = None):
        self.spec = spec
        self.artifacts = artifacts
        self.protocol = protocol
        self.served_name = served_name
        self.log_path = Path(log_path) if log_path else None
        self.port = spec.port or free_port(spec.host)
        self.proc: subprocess.Popen | None = None
        self.log_lines: list[str] = []
        self._log_thread: threading.Thread | None = None
        self.started_at: float | None = None
        self.ready_after_s: float | None = None
        self.exit_code: int | None = None

    # -- install ----------------------------------------------------------------------------
    @classmethod
    def installed_executable(cls) -> Path | None:
        """What tools/bootstrap.sh puts in the cache to launch this kind; None when the kind
        is installed some other way (a GPU image, a managed service)."""
        return None

    @classmethod
    def install_hint(cls) -> str:
        """The sentence that tells a user how to install this kind."""
        if cls.bootstrap_step is None:
            return f"{cls.kind}: install {cls.installs}"
        return (f"{symbolic(cls.installed_executable())} is missing; run `make {cls.setup_target}` (or "
                f"tools/bootstrap.sh {cls.bootstrap_step}) to install {cls.installs}")

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

    def sampling_fields(self, decoding: dict) -> dict:
        """Request-body fields for the protocol's decoding settings, in this engine's dialect."""
        return {"temperature": decoding["temperature"], "top_p": decoding["top_p"],
                "top_k": decoding["top_k"], "min_p": decoding["min_p"],
                "repetition_penalty": decoding["repetition_penalty"], "seed": decoding["seed"]}

    def output_length_fields(self, n: int) -> dict:
        """Fields that make the engine emit exactly n tokens, where it honours them."""
        return {"max_tokens": n}

    def reset_prefix_cache(self, client: httpx.Client) -> str:
        """Empty the engine's prefix cache where it offers a way; say what happened."""
        return "not offered by this engine"

    def prefix_cache_fields(self, state: str) -> dict:
        """Request-body fields that keep the engine's prefix cache in the protocol's state for every
        request, where a flush between points is not enough (an engine that caches every prompt)."""
        return {}

    # -- shared mechanics ----------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://{self.spec.host}:{self.port}"

    def attach(self, endpoint: str) -> None:
        """Talk to an engine of this arm that is already serving at `endpoint` (the runner
        started it) instead of one started here."""
        self.port = urlparse(endpoint).port

    def headers(self) -> dict[str, str]:
        return {}

    def launch_record(self) -> dict:
        """The launch as it goes into the passport: command and environment, paths symbolic."""
        return {"command": [symbolic(c) for c in self.command()],
                "env": {k: symbolic(v) for k, v in self.env().items()}}

    def start(self) -> "EngineAdapter":
        cmd = self.command()
        if self.log_path:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self.log_path.write_text("")
        self.started_at = time.monotonic()
        # A new session makes the engine the leader of its own process group: stop() can then
        # end its whole tree (vLLM forks an engine-core process) and nothing else.
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env={**os.environ, **self.env()}, cwd=self.cwd(),
                                     start_new_session=True, text=True, errors="replace", bufsize=1,
                                     preexec_fn=die_with_parent)
        self._log_thread = threading.Thread(target=self._pump_log, daemon=True)
        self._log_thread.start()
        return self

    def _pump_log(self) -> None:
        """Copy the engine's output to its log file and memory. A log file that cannot be written
        (a full disk) is given up, not the reading: an unread pipe would stall the engine."""
        out = open(self.log_path, "a") if self.log_path else None
        try:
            for line in self.proc.stdout:
                line = symbolic(line)
                self.log_lines.append(line)
                if out:
                    try:
                        out.write(line)
                        out.flush()
                    except OSError:
                        out = _close_quietly(out)
        finally:
            if out:
                _close_quietly(out)

    def wait_ready(self, timeout_s: float | None = None) -> float:
        timeout_s = timeout_s or self.spec.startup_timeout_s
        deadline = time.monotonic() + timeout_s
        with self.http_client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self.proc is not None and self.proc.poll() is not None:
                    self.exit_code = self.proc.returncode
                    self._join_log()
                    raise EngineStartError(f"{self.kind} exited with code {self.proc.returncode} before "
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

    def request_route(self) -> dict:
        """Where chat requests go and what the API calls the output bound: the Target's fields."""
        return {"chat_path": "/v1/chat/completions", "max_tokens_field": "max_tokens", "ca_bundle": None}

    models_path = "/v1/models"
    # The protocol's decoding fields under this engine's own names, where they differ.
    decoding_field_names: ClassVar[dict[str, str]] = {}

    def honoured_decoding_fields(self, decoding: dict) -> dict:
        """Which of the protocol's decoding settings this arm's requests carry, and why any are
        left out: the fairness check reads it, since an arm that cannot send top_k samples
        differently from one that does."""
        body = self.sampling_fields(decoding)
        sent = [k for k in decoding if self.decoding_field_names.get(k, k) in body]
        return {"sent": sorted(sent), "not_sent": {k: self.decoding_field_left_out(k) for k in decoding if k not in sent}}

    def decoding_field_left_out(self, name: str) -> str:
        """Why this kind does not send a decoding field."""
        return getattr(self, "fields_not_sent", {}).get(name, "not sent by this engine's adapter")

    def restore(self, engine_record: dict) -> None:
        """Take back what readiness found (engine.json) when attaching to an engine started elsewhere."""

    def is_alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace_s: float = 20.0) -> int | None:
        """SIGTERM the engine's process group, SIGKILL what is left after the grace period."""
        if self.proc is None:
            return None
        pgid = self.proc.pid
        if self.proc.poll() is None:
            signal_group(pgid, signal.SIGTERM)
            signal_group(pgid, signal.SIGCONT)  # a frozen (SIGSTOPped) engine must wake to act on it
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                signal_group(pgid, signal.SIGKILL)
                self.proc.wait(10)
        # Children that outlived the leader (same group) get the same treatment.
        deadline = time.monotonic() + grace_s
        while group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if group_alive(pgid):
            signal_group(pgid, signal.SIGKILL)
        self.exit_code = self.proc.returncode
        self._join_log()
        return self.exit_code

    def _join_log(self) -> None:
        if self._log_thread:
            self._log_thread.join(timeout=5)

    def log_tail(self, n: int = 25) -> str:
        return "".join(self.log_lines[-n:])

    def find_in_log(self, pattern: str, flags=0) -> re.Match | None:
        rx = re.compile(pattern, flags)
        for line in self.log_lines:
            m = rx.search(line)
            if m:
                return m
        return None

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

    # -- set-up (a kind with a bootstrap_step also has is_installed() and install(ctx)) -----
    install_label: ClassVar[str] = ""  # how set-up's progress line names this kind's install
    builds_from_source: ClassVar[bool] = False  # its install needs a C++ compiler, cmake and make


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
