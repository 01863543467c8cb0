"""Where a replay sends: the endpoint, its wire protocol, the model and how the calls are read.

Pure: building the request bodies and deciding whether an endpoint is local. Nothing here sends.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from latencylens_collector.traffic.prompt import split_prompt, synthetic_prompt
from latencylens_collector.traffic.shape import RequestShape

Api = Literal["openai", "anthropic"]
APIS: Final = ("openai", "anthropic")
IGNORE_EOS_SERVERS: Final = frozenset({"vllm", "llamacpp", "sglang"})
"""Servers whose OpenAI-compatible API takes ``ignore_eos`` (an unknown field is a 400 elsewhere)."""
ANTHROPIC_MIN_CACHE_TOKENS: Final = 1024
"""Anthropic caches a prefix of at least this many tokens (smaller models; larger ones need more)."""


@dataclass(frozen=True)
class Target:
    """An endpoint to replay against. ``provider`` names the LatencyLens adapter that reads its
    responses (``gen_ai.provider.name``): ``vllm`` for a vLLM server, ``groq`` for Groq; it defaults
    to the wire protocol."""

    base_url: str
    model: str
    api: Api = "openai"
    api_key: str = "unused"
    provider: str = ""
    ignore_eos: bool | None = None
    """None: only for servers known to take it (:data:`IGNORE_EOS_SERVERS`)."""
    timeout_s: float = 600.0

    @property
    def provider_name(self) -> str:
        return self.provider or self.api

    @property
    def sends_ignore_eos(self) -> bool:
        if self.ignore_eos is not None:
            return self.ignore_eos
        return self.api == "openai" and self.provider_name in IGNORE_EOS_SERVERS


def openai_request(shape: RequestShape, target: Target) -> dict[str, Any]:
    """Chat Completions keyword arguments for ``shape``: streamed with usage, ``max_tokens`` the
    recorded output, ``ignore_eos`` (and ``min_tokens``) in the body where the server takes it."""
    body: dict[str, Any] = {
        "model": target.model,
        "messages": [
            {
                "role": "user",
                "content": synthetic_prompt(
                    shape.input_tokens, shape.cached_input_tokens, shape.source_trace_id
                ),
            }
        ],
        "max_tokens": max(shape.output_tokens, 1),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if target.sends_ignore_eos:
        body["extra_body"] = {"ignore_eos": True, "min_tokens": max(shape.output_tokens, 1)}
    return body


def anthropic_request(shape: RequestShape, target: Target) -> dict[str, Any]:
    """Messages keyword arguments for ``shape``, streamed; a recorded cached prefix long enough for
    Anthropic's cache goes in a system block marked ``cache_control`` so the replay can hit it too."""
    prefix, rest = split_prompt(shape.input_tokens, shape.cached_input_tokens, shape.source_trace_id)
    body: dict[str, Any] = {
        "model": target.model,
        "max_tokens": max(shape.output_tokens, 1),
        "stream": True,
    }
    if shape.cached_input_tokens >= ANTHROPIC_MIN_CACHE_TOKENS:
        body["system"] = [{"type": "text", "text": prefix, "cache_control": {"type": "ephemeral"}}]
        text = rest
    else:
        text = prefix + rest
    body["messages"] = [{"role": "user", "content": text or " the"}]
    return body


def is_loopback(base_url: str) -> bool:
    """True when ``base_url`` names this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    host = urlsplit(base_url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


__all__ = [
    "ANTHROPIC_MIN_CACHE_TOKENS",
    "APIS",
    "IGNORE_EOS_SERVERS",
    "Api",
    "Target",
    "anthropic_request",
    "is_loopback",
    "openai_request",
]
