"""sglang-router (the PyPI wheel, its Rust router inside) in front of any OpenAI-compatible replicas:
it picks a replica per request by its policy, retries a failed attempt on another replica, and
counts each replica's outcomes on its own Prometheus endpoint."""
from __future__ import annotations

import dataclasses
import subprocess
from typing import Literal

import httpx
from pydantic import Field, field_validator

from stackbook.engines.facts import ProcessRole
from stackbook.routing.router_kind import RouterKind
from stackbook.routing.spec import RouterSpec

SGLANG_ROUTER_VERSION = "0.3.2"

# Flags the deployment sets itself, each with the field that sets it.
MANAGED_FLAGS = {"--host": "the replicas' engine.host", "--port": "a free port", "--worker-urls": "the replicas",
                 "--policy": "router.policy", "--prometheus-port": "a free port",
                 "--prometheus-host": "the replicas' engine.host", "--cache-threshold": "router.cache_threshold",
                 "--balance-abs-threshold": "router.balance_abs_threshold",
                 "--balance-rel-threshold": "router.balance_rel_threshold",
                 "--retry-max-retries": "router.retries", "--disable-retries": "router.retries",
                 "--disable-circuit-breaker": "router.circuit_breaker"}


class SglangRouterSpec(RouterSpec):
    kind: Literal["sglang"]
    policy: Literal["random", "round_robin", "cache_aware", "power_of_two"] = "cache_aware"
    cache_threshold: float | None = Field(None, ge=0, le=1, description="cache_aware: the prefix match above which "
                                          "a request goes to the replica holding it (sglang-router's default 0.3)")
    balance_abs_threshold: int | None = Field(None, ge=0, description="cache_aware: balance when the busiest "
                                              "replica has this many more requests than the idlest (default 64)")
    balance_rel_threshold: float | None = Field(None, ge=1, description="cache_aware: and this many times as many "
                                                "(default 1.5)")
    retries: int | None = Field(None, ge=1, description="attempts per request, the first included (default 5; 1: "
                                "no retry)")
    circuit_breaker: bool = True
    extra_args: list[str] = Field(default_factory=list, description="further launch_router flags")

    @field_validator("extra_args")
    @classmethod
    def _not_managed(cls, v: list[str]) -> list[str]:
        for i, arg in enumerate(v):
            flag = arg.split("=", 1)[0]
            if flag in MANAGED_FLAGS:
                raise ValueError(f"entry {i} ({flag!r}) is a flag the deployment sets itself, from "
                                 f"{MANAGED_FLAGS[flag]}; set that instead and remove {flag} from extra_args")
        return v


def labels(key: str) -> tuple[str, dict[str, str]]:
    """A flattened series key ('name{a=b,c=d}', as measure.telemetry writes it) as (name, labels)."""
    name, _, rest = key.partition("{")
    pairs = (p.split("=", 1) for p in rest.rstrip("}").split(",") if "=" in p)
    return name, {k: v for k, v in pairs}


def by_label(delta: dict, series: str, label: str) -> dict[str, float]:
    """One series' values summed per value of one label."""
    out: dict[str, float] = {}
    for key, value in delta.items():
        name, lab = labels(key)
        if name == series and label in lab:
            out[lab[label]] = out.get(lab[label], 0.0) + value
    return out


def total(delta: dict, series: str) -> float | None:
    values = [v for k, v in delta.items() if labels(k)[0] == series]
    return sum(values) if values else None


class SglangRouter(RouterKind):
    spec_model = SglangRouterSpec
    installs = f"sglang-router {SGLANG_ROUTER_VERSION} (PyPI wheel with its Rust router) in its own environment"
    env_name = f"sglang-router-{SGLANG_ROUTER_VERSION}"
    # it renames its own process "sglang::router" once started
    process_roles = (ProcessRole(pattern=r"sglang::router|sglang_router", role="router"),)
    shares_source = "the router's per-replica outcomes (smg_worker_cb_outcomes_total, success)"
    dialect = ("the router parses each request into SGLang's own schema and sends that on: fields outside it are "
               "dropped (seen with 0.3.2: llama.cpp's cache_prompt and repeat_penalty), max_tokens arrives as "
               "max_completion_tokens, top_k must be -1 or at least 1 (the client sends -1 for 0: both mean no "
               "top-k cut) and stream_options only with stream")

    @classmethod
    def route(cls, target, replica_urls: list[str]):
        """The router refuses top_k 0; -1 means the same (no top-k cut) to it and to the replicas."""
        if target.sampling.get("top_k") == 0:
            return dataclasses.replace(target, sampling={**target.sampling, "top_k": -1})
        return target

    @property
    def metrics_url(self) -> str:
        return f"http://{self.host}:{self.metrics_port}"

    def command(self) -> list[str]:
        s = self.spec
        options = {"--cache-threshold": s.cache_threshold, "--balance-abs-threshold": s.balance_abs_threshold,
                   "--balance-rel-threshold": s.balance_rel_threshold, "--retry-max-retries": s.retries}
        return [str(self.installed_python()), "-m", "sglang_router.launch_router",
                "--host", self.host, "--port", str(self.port), "--worker-urls", *self.replica_urls,
                "--policy", s.policy, "--prometheus-host", self.host, "--prometheus-port", str(self.metrics_port),
                # the replicas are healthy before the router starts: register them at once
                "--worker-startup-check-interval", "1", "--log-level", "warn",
                *[str(x) for flag, value in options.items() if value is not None for x in (flag, value)],
                *([] if s.circuit_breaker else ["--disable-circuit-breaker"]), *s.extra_args]

    def ready(self, client: httpx.Client) -> bool:
        if not self.replica_urls:  # started alone (the check before a run): it answers, routing to none
            return client.get(f"{self.base_url}/liveness").status_code == 200
        r = client.get(f"{self.base_url}/readiness")
        body = r.json() if r.status_code == 200 else {}
        return body.get("healthy_workers") == len(self.replica_urls) == body.get("total_workers")

    def version(self) -> str | None:
        code = "import importlib.metadata as m; print(m.version('sglang-router'))"
        try:
            out = subprocess.run([str(self.installed_python()), "-c", code], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() or None

    @classmethod
    def served_by_worker(cls, delta: dict, replica_urls: list[str]) -> list[float] | None:
        outcomes = {}
        for key, value in delta.items():
            name, lab = labels(key)
            if name == "smg_worker_cb_outcomes_total" and lab.get("outcome") == "success":
                outcomes[lab.get("worker")] = outcomes.get(lab.get("worker"), 0.0) + value
        return [outcomes.get(url, 0.0) for url in replica_urls] if outcomes else None

    @classmethod
    def router_counts(cls, delta: dict) -> dict:
        failures = {}
        for key, value in delta.items():
            name, lab = labels(key)
            if name == "smg_worker_cb_outcomes_total" and lab.get("outcome") == "failure" and value:
                failures[lab.get("worker")] = value
        duration_sum, duration_n = total(delta, "smg_router_request_duration_seconds_sum"), total(
            delta, "smg_router_request_duration_seconds_count")
        return {"requests": total(delta, "smg_router_requests_total"),
                "selections": total(delta, "smg_worker_selection_total"),
                "retries": total(delta, "smg_worker_retries_total") or 0.0,
                "failed_attempts_by_replica": failures,
                "errors_by_type": by_label(delta, "smg_worker_errors_total", "error_type"),
                "upstream_status": by_label(delta, "smg_router_upstream_responses_total", "status_code"),
                "circuit_open_at_end": sorted(w for w, v in by_label(delta, "smg_worker_cb_state", "worker").items()
                                              if v),
                "request_duration_ms_mean": round(1000 * duration_sum / duration_n, 3) if duration_n else None}

    @classmethod
    def install(cls, ctx) -> None:
        from stackbook.engines.install import InstallFailed, fresh_venv, imports, log, mark_installed, pip_logged

        folder = cls.install_dir()
        log(f"router sglang: installing sglang-router {SGLANG_ROUTER_VERSION} into its own environment")
        python = fresh_venv(ctx, folder)
        if not pip_logged(ctx.pip_log(cls.env_name), [str(python), "-m", "pip", "install", "-q",
                                                       f"sglang-router=={SGLANG_ROUTER_VERSION}"]):
            raise InstallFailed("")  # pip's log, just shown, says why
        if not imports(python, "import sglang_router.launch_router", quiet=False):
            raise InstallFailed("sglang-router installed but `import sglang_router.launch_router` failed")
        mark_installed(folder)
