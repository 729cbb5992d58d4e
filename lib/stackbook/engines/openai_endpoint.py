"""A managed OpenAI-compatible endpoint: nothing to launch, no local weights, no memory to size;
the API key comes from the environment."""
from __future__ import annotations

import os
import time
from typing import Literal
from urllib.parse import urlparse

from pydantic import field_validator

from stackbook.engines.base import EngineAdapter
from stackbook.engines.spec import CapacityBasis, EngineSpec


class OpenAIEndpoint(EngineSpec):
    """A managed OpenAI-compatible endpoint. The API key is read from the named variable."""
    serves_local_weights = False
    sizing_skip_reason = "a managed endpoint has no local memory to size"

    kind: Literal["openai_endpoint"]
    base_url: str
    api_key_env: str | None = None
    served_model: str | None = None

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {v!r}")
        return v.rstrip("/")

    def configured_capacity(self, protocol) -> dict:
        return {"note": "a managed endpoint does not disclose its capacity"}

    def predicted_capacity(self, basis: CapacityBasis) -> dict:
        return {"rule": "a managed endpoint discloses no capacity"}

    def speculative_decoding(self) -> str:
        return "not known: a managed endpoint does not say whether it decodes speculatively"


class OpenAIEndpointAdapter(EngineAdapter):
    spec_model = OpenAIEndpoint
    installs = "nothing: the provider serves the model"
    health_path = "/v1/models"
    metrics_path = None

    def __init__(self, spec, artifacts, protocol, served_name, log_path=None):
        super().__init__(spec, artifacts, protocol, served_name, log_path)
        self.port = urlparse(spec.base_url).port
        if spec.served_model:
            self.served_name = spec.served_model

    @property
    def base_url(self) -> str:
        return self.spec.base_url.removesuffix("/v1")

    def attach(self, endpoint: str) -> None:
        """The endpoint is the campaign's base_url already; nothing to re-point."""

    @property
    def remote(self) -> bool:  # type: ignore[override]
        host = urlparse(self.spec.base_url).hostname or ""
        return host not in ("127.0.0.1", "localhost", "::1")

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
        return {"Authorization": f"Bearer {key}"} if key else {}

    def command(self) -> list[str]:
        return []

    def launch_record(self) -> dict:
        return {"command": [], "endpoint": self.spec.base_url, "api_key_env": self.spec.api_key_env,
                "remote": self.remote}

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
