"""A managed OpenAI-compatible endpoint: nothing to launch, no local weights, no memory to size;
the API key comes from the environment.

A hosted API rejects fields it does not know (the hosted OpenAI API answers 400 "Unrecognized
request argument supplied: top_k"), so requests carry only the chat-completions API's own fields;
an engine's extras (top_k, min_p, repetition_penalty, ignore_eos, min_tokens) are sent only when
the campaign asks for them. The base URL is used as given (`.../v1`, `.../v1beta/openai`), and
the API's paths are appended after it, with the campaign's query parameters (Azure's api-version).
"""
from __future__ import annotations

import os
import time
from typing import Any, Literal
from urllib.parse import urlencode, urlsplit

import httpx
from pydantic import Field, field_validator

from stackbook.engines.base import EngineAdapter
from stackbook.engines.spec import CapacityBasis, EngineSpec
from stackbook.loadgen.http_client import STANDARD_HEADERS, refuse_proxy, tls_context
from stackbook.locations import resolve_symbolic

# The decoding fields of the OpenAI chat-completions API; the protocol's others are engine extras.
OPENAI_DECODING_FIELDS = ("temperature", "top_p", "seed")
ENGINE_DECODING_EXTRAS = ("top_k", "min_p", "repetition_penalty")


class OpenAIEndpoint(EngineSpec):
    """A managed OpenAI-compatible endpoint. The API key is read from the named variable."""
    serves_local_weights = False
    sizing_skip_reason = "a managed endpoint has no local memory to size"
    not_relayable = "a managed endpoint is reached at its own base_url, not at an address the harness hands out"

    kind: Literal["openai_endpoint"]
    base_url: str = Field(description="the API's base URL as the provider gives it, e.g. https://api.openai.com/v1 "
                          "or https://generativelanguage.googleapis.com/v1beta/openai; paths are appended to it")
    api_key_env: str | None = None
    served_model: str | None = None
    auth_header: str = Field("Authorization", description="the header that carries the key (Azure: api-key)")
    auth_scheme: str | None = Field("Bearer", description="the word before the key in that header; "
                                    "null sends the bare key (Azure's api-key)")
    query: dict[str, str] = Field(default_factory=dict, description="query parameters on every request "
                                  "(Azure: {api-version: 2024-10-21})")
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = Field(
        "max_tokens", description="the name the API gives the output bound; the hosted OpenAI API's newer models "
        "want max_completion_tokens")
    engine_sampling: bool = Field(False, description="also send the protocol's top_k, min_p and repetition_penalty "
                                  "(a self-hosted vLLM or SGLang behind a URL accepts them; a hosted API refuses them)")
    exact_length: Literal["probe", "always", "never"] = Field(
        "probe", description="ignore_eos and min_tokens: probe (sent when one request at readiness shows the "
        "endpoint honours them), always, or never (the passport then says lengths were not controlled)")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="fields added to every request body as "
                                       "given (a provider's own options)")
    ca_bundle: str | None = Field(None, description="PEM file of the CA that signed the server's certificate "
                                  "(a private or self-signed CA); None: the system's trust store")

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {v!r}")
        u = urlsplit(v)
        if u.query or u.fragment:
            raise ValueError(f"base_url {v!r} carries a query or fragment; give query parameters in "
                             "engine.query (e.g. query: {api-version: 2024-10-21})")
        if not u.hostname:
            raise ValueError(f"base_url {v!r} has no host; write IPv6 literals in brackets: http://[::1]:8000/v1")
        return v.rstrip("/")

    @field_validator("ca_bundle")
    @classmethod
    def _ca(cls, v: str | None) -> str | None:
        if v is not None and not resolve_symbolic(v).is_file():
            raise ValueError(f"ca_bundle {v!r} is not a file; give the PEM file of the CA that signed the "
                             "server's certificate (relative to the repository root, or absolute)")
        return v

    @field_validator("extra_body")
    @classmethod
    def _extra(cls, v: dict) -> dict:
        reserved = {"model", "messages", "stream", "stream_options"} & set(v)
        if reserved:
            raise ValueError(f"extra_body may not set {sorted(reserved)}: the workload decides them")
        return v

    def configured_capacity(self, protocol) -> dict:
        return {"note": "a managed endpoint does not disclose its capacity"}

    def predicted_capacity(self, basis: CapacityBasis) -> dict:
        return {"rule": "a managed endpoint discloses no capacity"}

    def speculative_decoding(self) -> str:
        return "not known: a managed endpoint does not say whether it decodes speculatively"


class OpenAIEndpointAdapter(EngineAdapter):
    spec_model = OpenAIEndpoint
    installs = "nothing: the provider serves the model"
    metrics_path = None

    def __init__(self, spec, artifacts, protocol, served_name, log_path=None):
        super().__init__(spec, artifacts, protocol, served_name, log_path)
        u = urlsplit(spec.base_url)
        self.port = u.port
        self.api_path = u.path.rstrip("/")
        if spec.served_model:
            self.served_name = spec.served_model
        # Whether ignore_eos/min_tokens are sent: decided by the campaign, or by the probe at readiness.
        self._exact_length(spec.exact_length == "always",
                           {"always": "engine.exact_length: always", "never": "engine.exact_length: never",
                            "probe": "not probed yet"}[spec.exact_length])

    def _exact_length(self, accepted: bool, reason: str) -> None:
        """Record whether this arm forces exact output lengths; the kind as such promises nothing
        (its class length_control stays None), this instance does once the endpoint showed it."""
        self.exact_length_accepted, self.exact_length_reason = accepted, reason
        self.length_control = f"min_tokens and ignore_eos ({reason})" if accepted else None

    # -- where requests go ----------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """The server's root (scheme, host, port); the API's own path is kept in every route."""
        u = urlsplit(self.spec.base_url)
        return f"{u.scheme}://{u.netloc}"

    def _route(self, path: str) -> str:
        q = f"?{urlencode(self.spec.query)}" if self.spec.query else ""
        return f"{self.api_path}{path}{q}"

    @property
    def health_path(self) -> str:  # type: ignore[override]
        return self._route("/models")

    @property
    def models_path(self) -> str:  # type: ignore[override]
        return self._route("/models")

    def request_route(self) -> dict:
        return {"chat_path": self._route("/chat/completions"), "max_tokens_field": self.spec.max_tokens_field,
                "ca_bundle": str(resolve_symbolic(self.spec.ca_bundle)) if self.spec.ca_bundle else None}

    def http_client(self, timeout: float = 10.0) -> httpx.Client:
        refuse_proxy(self.spec.base_url)
        verify = tls_context(self.request_route()["ca_bundle"]) if self.spec.base_url.startswith("https") else True
        return httpx.Client(timeout=timeout, verify=verify, trust_env=False, headers=STANDARD_HEADERS)

    def attach(self, endpoint: str) -> None:
        """The endpoint is the campaign's base_url already; nothing to re-point."""

    @property
    def remote(self) -> bool:  # type: ignore[override]
        host = urlsplit(self.spec.base_url).hostname or ""
        return host not in ("127.0.0.1", "localhost", "::1")

    # -- credentials ----------------------------------------------------------------------
    def api_key(self) -> str | None:
        if not self.spec.api_key_env:
            return None
        key = os.environ.get(self.spec.api_key_env)
        if not key:
            raise RuntimeError(f"engine.api_key_env names {self.spec.api_key_env}, which is not set; "
                               f"export {self.spec.api_key_env}=... before running")
        return key

    def headers(self) -> dict[str, str]:
        key = self.api_key()
        if not key:
            return {}
        return {self.spec.auth_header: f"{self.spec.auth_scheme} {key}" if self.spec.auth_scheme else key}

    # -- the request dialect --------------------------------------------------------------
    def sampling_fields(self, decoding: dict) -> dict:
        names = OPENAI_DECODING_FIELDS + (ENGINE_DECODING_EXTRAS if self.spec.engine_sampling else ())
        return {**{k: decoding[k] for k in names}, **self.spec.extra_body}

    def decoding_field_left_out(self, name: str) -> str:
        return ("not a field of the OpenAI chat-completions API; set engine.engine_sampling: true for a "
                "self-hosted engine that accepts it")

    def output_length_fields(self, n: int) -> dict:
        if self.exact_length_accepted:
            return {"max_tokens": n, "min_tokens": n, "ignore_eos": True}
        return {"max_tokens": n}

    def _ready_extra(self, client: httpx.Client) -> bool:
        if self.spec.exact_length == "probe":
            from stackbook.gate.probe import exact_length_accepted
            from stackbook.loadgen.drivers import Target
            d = self.protocol.decoding.resolved()
            target = Target(self.base_url, self.served_name, self.sampling_fields(d), {"max_tokens": 1},
                            self.headers(), self.protocol.request_timeout_s, **self.request_route())
            self._exact_length(*exact_length_accepted(target, {"min_tokens": 24, "ignore_eos": True}))
        return True

    def restore(self, engine_record: dict) -> None:
        found = (engine_record.get("launch") or {}).get("exact_length") or {}
        if "accepted" in found:
            self._exact_length(found["accepted"], found.get("reason", self.exact_length_reason))

    # -- no process -----------------------------------------------------------------------
    def command(self) -> list[str]:
        return []

    def launch_record(self) -> dict:
        return {"command": [], "endpoint": self.spec.base_url, "api_key_env": self.spec.api_key_env,
                "auth_header": self.spec.auth_header, "query": self.spec.query, "remote": self.remote,
                "max_tokens_field": self.spec.max_tokens_field, "extra_body": self.spec.extra_body,
                "exact_length": {"mode": self.spec.exact_length, "accepted": self.exact_length_accepted,
                                 "reason": self.exact_length_reason}}

    def start(self):
        self.started_at = time.monotonic()
        return self

    def stop(self, grace_s: float = 0) -> None:
        return None

    def is_alive(self) -> bool:
        return True

    def identity(self) -> dict:
        return {"engine": "managed OpenAI-compatible endpoint", "base_url": self.spec.base_url,
                "remote": self.remote, "version": "not disclosed by the provider"}

    def realized_capacity(self) -> dict:
        return {"source": "not observable on a managed endpoint"}
