"""Provider adapters, looked up by ``gen_ai.provider.name``.

Adding a provider is one module in this package plus one line in ``_REGISTRY``. Any name not listed
uses the OpenAI-compatible adapter (most inference servers speak that shape) but keeps its own name.
Modules are imported on first lookup, which happens when a function is decorated, not per call.
"""

from __future__ import annotations

import importlib

from latencylens.providers._base import ProviderAdapter

_REGISTRY: dict[str, tuple[str, str]] = {
    "anthropic": ("latencylens.providers.anthropic", "AnthropicAdapter"),
    "aws.bedrock": ("latencylens.providers.bedrock", "BedrockAdapter"),
    "bedrock": ("latencylens.providers.bedrock", "BedrockAdapter"),
    "cerebras": ("latencylens.providers.cerebras", "CerebrasAdapter"),
    "gcp.gemini": ("latencylens.providers.gemini", "GeminiAdapter"),
    "gcp.gen_ai": ("latencylens.providers.gemini", "GeminiAdapter"),
    "gcp.vertex_ai": ("latencylens.providers.gemini", "GeminiAdapter"),
    "gemini": ("latencylens.providers.gemini", "GeminiAdapter"),
    "groq": ("latencylens.providers.groq", "GroqAdapter"),
    "llama.cpp": ("latencylens.providers.llamacpp", "LlamaCppAdapter"),
    "llamacpp": ("latencylens.providers.llamacpp", "LlamaCppAdapter"),
    "nim": ("latencylens.providers.nim", "NIMAdapter"),
    "nvidia.nim": ("latencylens.providers.nim", "NIMAdapter"),
    "ollama": ("latencylens.providers.ollama", "OllamaAdapter"),
    "openai": ("latencylens.providers.openai", "OpenAIAdapter"),
    "sglang": ("latencylens.providers.sglang", "SGLangAdapter"),
    "tgi": ("latencylens.providers.tgi", "TGIAdapter"),
    "vllm": ("latencylens.providers.vllm", "VLLMAdapter"),
}
_FALLBACK = _REGISTRY["openai"]

__all__ = ["ProviderAdapter", "get_adapter", "known_providers"]


def known_providers() -> list[str]:
    """Names with an adapter of their own (others fall back to the OpenAI-compatible one)."""
    return sorted(_REGISTRY)


def get_adapter(name: str) -> ProviderAdapter:
    """The adapter for ``name``; its ``.name`` is ``name`` as given, whichever module serves it."""
    module_name, class_name = _REGISTRY.get(name.lower(), _FALLBACK)
    adapter_class = getattr(importlib.import_module(module_name), class_name)
    adapter: ProviderAdapter = adapter_class(name)
    return adapter
