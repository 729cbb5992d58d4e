"""How one engine kind wants its requests: where chat requests go, which body fields carry the
protocol's decoding settings and exact output lengths, and how the prefix cache is held in the
protocol's state. A kind overrides only what differs from the OpenAI-compatible defaults here."""
from __future__ import annotations

from typing import ClassVar

import httpx


class RequestDialect:
    """The request-body side of an adapter. It reads nothing but its own class attributes and the
    arm's protocol; the process and the engine's facts live elsewhere."""
    # How output_length_fields() makes the engine emit exactly the requested tokens; None where it
    # cannot, and then the passport says output lengths were not controlled.
    length_control: ClassVar[str | None] = None
    # The protocol's decoding fields under this engine's own names, where they differ.
    decoding_field_names: ClassVar[dict[str, str]] = {}
    # Decoding fields this kind leaves out of every request, each with the reason.
    fields_not_sent: ClassVar[dict[str, str]] = {}
    models_path = "/v1/models"

    def sampling_fields(self, decoding: dict) -> dict:
        """Request-body fields for the protocol's decoding settings, in this engine's dialect."""
        return {"temperature": decoding["temperature"], "top_p": decoding["top_p"],
                "top_k": decoding["top_k"], "min_p": decoding["min_p"],
                "repetition_penalty": decoding["repetition_penalty"], "seed": decoding["seed"]}

    def output_length_fields(self, n: int) -> dict:
        """Fields that make the engine emit exactly n tokens, where it honours them."""
        return {"max_tokens": n}

    def prefix_cache_fields(self, state: str) -> dict:
        """Request-body fields that keep the engine's prefix cache in the protocol's state for every
        request, where a flush between points is not enough (an engine that caches every prompt)."""
        return {}

    def reset_prefix_cache(self, client: httpx.Client) -> str:
        """Empty the engine's prefix cache where it offers a way; say what happened."""
        return "not offered by this engine"

    def request_route(self) -> dict:
        """Where chat requests go and what the API calls the output bound: the Target's fields."""
        return {"chat_path": "/v1/chat/completions", "max_tokens_field": "max_tokens", "ca_bundle": None}

    def headers(self) -> dict[str, str]:
        """Headers every request carries (a managed endpoint's credentials)."""
        return {}

    def honoured_decoding_fields(self, decoding: dict) -> dict:
        """Which of the protocol's decoding settings this arm's requests carry, and why any are
        left out: the fairness check reads it, since an arm that cannot send top_k samples
        differently from one that does."""
        body = self.sampling_fields(decoding)
        sent = [k for k in decoding if self.decoding_field_names.get(k, k) in body]
        return {"sent": sorted(sent),
                "not_sent": {k: self.decoding_field_left_out(k) for k in decoding if k not in sent}}

    def decoding_field_left_out(self, name: str) -> str:
        """Why this kind does not send a decoding field."""
        return self.fields_not_sent.get(name, "not sent by this engine's adapter")
