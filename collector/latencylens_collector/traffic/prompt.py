"""Synthetic prompt text of a given token length; no recorded content is ever sent.

The text is words of :data:`VOCABULARY`, each preceded by a space. Every such word is one token in
the byte-pair tokenizers of the major model families (OpenAI's cl100k/o200k, Llama 3, Mistral,
Qwen), because their pre-tokenizers split at the space and the words are common: ``n`` words are
``n`` tokens, plus the few a chat template adds. A request's first ``cached`` words are the same
for every request (a shared prefix, as a system prompt is), so an endpoint with prefix caching
can hit its cache for them; the rest are drawn from a stream seeded per request, so nothing else
is shared by accident.
"""

from __future__ import annotations

import random
from typing import Final

VOCABULARY: Final = (
    "the of and to in is for on that with as at by from this be are was it an or not have all "
    "can more one will has new time about which their there other what so up out if were when "
    "into than its only over also after first most these some such where well many then them "
    "through between both under much each very should while same long part since high before "
    "during small large number world life year work state place point group order system water"
).split()
"""Common English words, each one token after a space in the tokenizers named above."""
PREFIX_SEED: Final = "latencylens-replay-shared-prefix"


def _words(count: int, seed: str) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(VOCABULARY) for _ in range(count)]


def synthetic_prompt(tokens: int, cached_tokens: int = 0, key: str = "") -> str:
    """About ``tokens`` tokens of text, the first ``cached_tokens`` of them a prefix shared by every
    call; ``key`` (the source request) chooses the rest, so the same request gets the same text."""
    if tokens < 0 or cached_tokens < 0:
        raise ValueError("token counts are never negative")
    shared = min(cached_tokens, tokens)
    words = _words(shared, PREFIX_SEED) + _words(tokens - shared, f"{PREFIX_SEED}/{key}")
    return "".join(f" {word}" for word in words)


def split_prompt(tokens: int, cached_tokens: int, key: str = "") -> tuple[str, str]:
    """The same text as :func:`synthetic_prompt` cut after the shared prefix: (prefix, rest)."""
    shared = min(max(cached_tokens, 0), max(tokens, 0))
    text = synthetic_prompt(tokens, cached_tokens, key)
    cut = sum(len(word) + 1 for word in _words(shared, PREFIX_SEED))
    return text[:cut], text[cut:]


def word_count(text: str) -> int:
    """Tokens of a synthetic prompt as this module counts them (words)."""
    return len(text.split())


__all__ = ["PREFIX_SEED", "VOCABULARY", "split_prompt", "synthetic_prompt", "word_count"]
