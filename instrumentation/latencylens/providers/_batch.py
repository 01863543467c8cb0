"""One call answered by several requests: a native API given a list of prompts (or ``n`` > 1)
answers a list of replies, or streams each request's chunks with its ``index``.

Such a call is one model call (one HTTP call, one span). Its counts are summed over the requests,
and its timing is that of the request the call waited for (each adapter says which, from what its
server reports). The helpers here keep the per-request bookkeeping in one place for the adapters
of servers that batch (SGLang's and llama.cpp's native ``/generate`` and ``/completion``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from latencylens.providers._base import MAX_READ, Usage, as_int, field_of
from latencylens.providers._chat import ChatCompletionsAdapter, ChatStreamState

MOST_REQUESTS = 4096
"""Requests of one streamed call tracked apart; chunks of any further index share one slot, so a
stream whose indices never repeat holds bounded memory."""


def summed(blocks: Sequence[Any], name: str) -> int | None:
    """The count ``name`` summed over the requests' blocks (``meta_info``, ``timings``, a reply),
    or None when a request lacks it (unknown, never an undercount) or the sum is past
    :data:`MAX_READ`."""
    counts = [count for count in (as_int(field_of(block, name)) for block in blocks) if count is not None]
    if not blocks or len(counts) != len(blocks):
        return None
    total = sum(counts)
    return total if total <= MAX_READ else None


def slowest(replies: Sequence[Any], took_ns: Callable[[Any], int | None]) -> Any:
    """The request that took longest by ``took_ns`` (the first when none says): the one the call
    waited for."""
    return max(replies, key=lambda reply: took_ns(reply) or -1)


class BatchStreamState(ChatStreamState):
    """OpenAI chat chunks as :class:`ChatStreamState` reads them; a native API's chunks are handed to
    :meth:`keep`, each request's last one kept by the ``index`` its chunks carry (a chunk without
    one is the single request's), and read at the end as a batch's replies when there were several."""

    __slots__ = ("_last_chunks",)

    def __init__(self, adapter: ChatCompletionsAdapter) -> None:
        super().__init__(adapter)
        self._last_chunks: dict[int | None, Any] = {}

    def keep(self, chunk: Any) -> int | None:
        """Remember a native ``chunk`` as its request's latest; the request's key."""
        index = field_of(chunk, "index")
        if type(index) is not int or (
            index not in self._last_chunks and len(self._last_chunks) >= MOST_REQUESTS
        ):
            index = None
        self._last_chunks[index] = self._usage_chunk = chunk
        return index

    def _read_as_batch(self) -> None:
        if len(self._last_chunks) > 1:  # each request's last chunk in index order: a batch's list
            ordered = sorted(self._last_chunks.items(), key=lambda item: -1 if item[0] is None else item[0])
            self._usage_chunk = [chunk for _, chunk in ordered]

    def usage(self) -> Usage:
        self._read_as_batch()
        return super().usage()

    def usage_attributes(self) -> dict[str, Any]:
        self._read_as_batch()
        return super().usage_attributes()
