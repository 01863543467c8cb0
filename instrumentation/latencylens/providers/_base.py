"""The one interface every provider adapter implements.

An adapter turns what a provider sent back (an SDK object, a plain dict, or the chunks of a stream)
into a :class:`Usage`: token counts and the server time the provider reported, in integer
nanoseconds. The generic wrapping code in ``latencylens._wrap`` is written once and calls only this
interface, so adding a provider means adding one module here and registering it in
``latencylens.providers``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Protocol

from latencylens.semconv import (
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_RESPONSE_ID,
    GEN_AI_RESPONSE_MODEL,
    GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
    GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
    GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
    PROVENANCE_DECODE,
    PROVENANCE_INFERENCE,
    PROVENANCE_PREFILL,
    PROVENANCE_QUEUE,
    PROVENANCE_SERVER_TOTAL,
    PROVIDER_DECODE_NS,
    PROVIDER_FIELDS_MISSING,
    PROVIDER_FIELDS_REPORTED,
    PROVIDER_INFERENCE_NS,
    PROVIDER_PREFILL_NS,
    PROVIDER_QUEUE_NS,
    PROVIDER_SERVER_TOTAL_NS,
    SOURCE_DERIVED,
    SOURCE_REPORTED,
)

_DERIVED_NONE: frozenset[str] = frozenset()

MAX_READ = 10**18
"""The largest count or ns read from a provider (≈ 31 years in ns); anything larger is no count. A
span's integers are int64 in OTLP (the exporter drops a larger one, logging an error), and adapters
add a few of them up (Anthropic's input, Groq's server total, a batch's counts)."""
MAX_SECONDS = 1e9
""":data:`MAX_READ` in seconds."""
MAX_MS = 1e12
""":data:`MAX_READ` in milliseconds."""


class CheckedAttributes(dict[str, Any]):
    """Span attributes an adapter built only from values whose types it checked itself: under
    non-empty string keys, each value exactly a ``str``, ``int``, ``float`` or ``bool``, except the
    keys named in ``lists``, whose values are non-empty lists of exact ``str``. Storing them on a span
    then needs no look at each value (``_attributes``); it compares equal to the same plain dict."""

    __slots__ = ("lists",)

    lists: tuple[str, ...]


@dataclass(slots=True)
class Usage:
    """Token counts and provider-reported server time for one model call.

    ``None`` means "not reported"; zero means "reported as zero". Server times are integer ns.
    ``server_total_ns`` is all server-side time including queue: for Groq it is
    ``queue_time + total_time``, for Cerebras ``time_info.total_time`` itself.
    ``inference_ns`` is prefill + decode where a provider does not split them (TGI).
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    reasoning_output_tokens: int | None = None
    queue_ns: int | None = None
    prefill_ns: int | None = None
    decode_ns: int | None = None
    inference_ns: int | None = None
    server_total_ns: int | None = None
    response_model: str | None = None
    response_id: str | None = None
    finish_reasons: list[str] = field(default_factory=list)
    fields_reported: list[str] = field(default_factory=list)
    """Provider field paths that were present, e.g. ``usage.queue_time``."""
    fields_missing: list[str] = field(default_factory=list)
    """Field paths the adapter expected and did not find."""
    derived: frozenset[str] = _DERIVED_NONE
    """Timings (``queue``, ``prefill``, ``decode``, ``inference``, ``server_total``) computed from
    reported fields rather than copied from one; every other timing present was reported as is."""

    def to_attributes(self) -> dict[str, Any]:
        """Span attributes for the fields that were reported (nothing for ``None``)."""
        attributes: dict[str, Any] = {}
        if self.input_tokens is not None:
            attributes[GEN_AI_USAGE_INPUT_TOKENS] = self.input_tokens
        if self.output_tokens is not None:
            attributes[GEN_AI_USAGE_OUTPUT_TOKENS] = self.output_tokens
        if self.cache_read_input_tokens is not None:
            attributes[GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = self.cache_read_input_tokens
        if self.cache_creation_input_tokens is not None:
            attributes[GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] = self.cache_creation_input_tokens
        if self.reasoning_output_tokens is not None:
            attributes[GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] = self.reasoning_output_tokens
        # Straight-line, with the names bound at import: this runs once per model call, and a loop
        # over per-call tuples of (name, key, provenance key, value) cost more than the reads.
        derived = self.derived
        reported, computed = SOURCE_REPORTED, SOURCE_DERIVED
        if self.queue_ns is not None:
            attributes[PROVIDER_QUEUE_NS] = self.queue_ns
            attributes[PROVENANCE_QUEUE] = computed if "queue" in derived else reported
        if self.prefill_ns is not None:
            attributes[PROVIDER_PREFILL_NS] = self.prefill_ns
            attributes[PROVENANCE_PREFILL] = computed if "prefill" in derived else reported
        if self.decode_ns is not None:
            attributes[PROVIDER_DECODE_NS] = self.decode_ns
            attributes[PROVENANCE_DECODE] = computed if "decode" in derived else reported
        if self.inference_ns is not None:
            attributes[PROVIDER_INFERENCE_NS] = self.inference_ns
            attributes[PROVENANCE_INFERENCE] = computed if "inference" in derived else reported
        if self.server_total_ns is not None:
            attributes[PROVIDER_SERVER_TOTAL_NS] = self.server_total_ns
            attributes[PROVENANCE_SERVER_TOTAL] = computed if "server_total" in derived else reported
        if self.response_model is not None:
            attributes[GEN_AI_RESPONSE_MODEL] = self.response_model
        if self.response_id is not None:
            attributes[GEN_AI_RESPONSE_ID] = self.response_id
        if self.finish_reasons:
            attributes[GEN_AI_RESPONSE_FINISH_REASONS] = list(self.finish_reasons)
        if self.fields_reported:
            attributes[PROVIDER_FIELDS_REPORTED] = list(self.fields_reported)
        if self.fields_missing:
            attributes[PROVIDER_FIELDS_MISSING] = list(self.fields_missing)
        return attributes


class StreamState(Protocol):
    """Per-stream state: sees every chunk once, in order, and yields the final :class:`Usage`."""

    decode_ends_at_last_content: bool
    """True when events after the last content chunk are the provider's bookkeeping, not generation
    (Anthropic's ``message_delta`` / ``message_stop``): decode then ends at the last content chunk."""

    def record_chunk(self, chunk: Any) -> bool:
        """Note one chunk; return True when it carries non-empty content (for TTFT)."""
        ...

    def usage(self) -> Usage:
        """What the chunks seen so far reported (usage usually arrives in the final chunk)."""
        ...

    def usage_attributes(self) -> dict[str, Any]:
        """Exactly ``usage().to_attributes()``: what the stream's span ends with."""
        ...


class StreamStateBase:
    """Defaults for a :class:`StreamState`: decode ends at the last chunk, and the usage attributes
    are built from :meth:`usage` (a state may build the same dict directly where that is measurably
    cheaper: it runs once per streamed call)."""

    __slots__ = ()

    decode_ends_at_last_content = False

    def usage(self) -> Usage:
        raise NotImplementedError

    def usage_attributes(self) -> dict[str, Any]:
        return self.usage().to_attributes()


class ProviderAdapter(Protocol):
    """What the generic model-call wrapper needs from a provider module."""

    name: str
    """Value for ``gen_ai.provider.name``."""

    def extract(self, response: Any, headers: Mapping[str, str] | None = None) -> Usage:
        """Read a complete (non-streamed) response: SDK object or plain dict; ``headers`` are the
        HTTP response headers when the caller could see them."""
        ...

    def new_stream_state(self) -> StreamState:
        """A fresh state for one streamed response."""
        ...

    def find_stream(self, response: Any) -> Any:
        """The stream inside a response container (Bedrock's ``{"stream": EventStream}``), else None."""
        ...

    def response_attributes(self, response: Any, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Span attributes of a complete response: exactly ``extract(response, headers).to_attributes()``."""
        ...


_MAPPING_CACHE_LIMIT = 512
mapping_types: dict[type, bool] = {}
"""type → whether it is a ``Mapping``: an ABC ``isinstance`` per absent field is a measurable share
of a stream chunk's cost. ``mapping_types.get(cls) is False`` is the cheapest "known SDK object" test
for per-chunk readers (``None``: not seen yet, take :func:`field_of`)."""


def _is_mapping(cls: type) -> bool:
    known = mapping_types.get(cls)
    if known is None:
        known = issubclass(cls, Mapping)
        if len(mapping_types) < _MAPPING_CACHE_LIMIT:
            mapping_types[cls] = known
    return known


def is_sdk_object(cls: type) -> bool:
    """Whether fields of ``cls`` instances are plain attribute reads (not a dict or other mapping),
    so a per-chunk reader can use ``getattr`` directly; cached per type."""
    mapping = mapping_types.get(cls)
    if mapping is None:
        mapping = cls is dict or _is_mapping(cls)
    return not mapping


_extra_only: set[tuple[type, str]] = set()
"""(pydantic model class, name) where the name is no declared field and no class attribute: a
server's extension field (vLLM's ``metrics``, SGLang's ``meta_info``, ...), found only in the
instance's ``__pydantic_extra__``. Reading it there costs a dict lookup; ``getattr`` on a chunk
without it goes through pydantic's ``__getattr__``, which raises inside (≈ 3 µs a chunk)."""


def _learn_absent(cls: type, name: str) -> None:
    """Remember ``name`` as extras-only on ``cls`` when it is (``getattr`` just found nothing)."""
    fields = getattr(cls, "__pydantic_fields__", None)
    lookup = getattr(cls, "__getattr__", None)
    if (
        isinstance(fields, dict)
        and hasattr(cls, "__pydantic_extra__")
        and getattr(lookup, "__module__", None) == "pydantic.main"  # not a model's own __getattr__
        and not name.startswith("_")  # private attributes take another path in pydantic
        and name not in fields
        and not hasattr(cls, name)
        and len(_extra_only) < _MAPPING_CACHE_LIMIT
    ):
        _extra_only.add((cls, name))


def field_of(obj: Any, name: str) -> Any:
    """``obj[name]`` for mappings, ``obj.name`` for SDK objects, including pydantic extras.

    Plain dicts (the common case for HTTP replies) take one ``dict.get``; pydantic models one
    attribute read, which also finds undeclared fields kept in ``__pydantic_extra__`` (a name the
    model does not declare is looked up there directly once known: :data:`_extra_only`).
    """
    cls = type(obj)
    if cls is dict:
        return obj.get(name)
    if obj is None:
        return None
    if _extra_only and (cls, name) in _extra_only:
        extra = getattr(obj, "__pydantic_extra__", None)
        return extra.get(name) if extra else None
    value = getattr(obj, name, None)
    if value is None:
        mapping = mapping_types.get(cls)
        if mapping or (mapping is None and _is_mapping(cls)):
            return obj.get(name)
        _learn_absent(cls, name)
    return value


_getters: dict[tuple[str, ...], Callable[[Any], tuple[Any, ...]]] = {}
"""One ``attrgetter`` per tuple of names (module constants of the adapters, so a bounded set)."""
_partial: set[tuple[type, tuple[str, ...]]] = set()
"""(type, names) whose instances lacked one of the names once: read those field by field rather than
raise and fall back every time (an SDK model without a provider's extension field, say)."""


def fields_of(obj: Any, names: tuple[str, ...]) -> Sequence[Any]:
    """``[field_of(obj, name) for name in names]`` in one call, for two or more names.

    SDK objects (pydantic models) are read with one C-level ``attrgetter`` call, which is about half
    the cost of reading the same fields one by one; mappings and objects lacking a field take the
    per-field path, with the same result.
    """
    cls = type(obj)
    if cls is dict:
        return [obj.get(name) for name in names]
    if obj is None:
        return [None] * len(names)
    mapping = mapping_types.get(cls)
    if mapping or (mapping is None and _is_mapping(cls)):
        return [field_of(obj, name) for name in names]
    if not _partial or (cls, names) not in _partial:
        getter = _getters.get(names)
        if getter is None:
            getter = _getters[names] = attrgetter(*names)
        try:
            return getter(obj)
        except AttributeError:
            if len(_partial) < _MAPPING_CACHE_LIMIT:
                _partial.add((cls, names))
    return [field_of(obj, name) for name in names]


def header(headers: Mapping[str, str] | None, name: str) -> str | None:
    """Header ``name`` (lower case) from case-insensitive (httpx) or plain mappings."""
    if headers is None:
        return None
    value = headers.get(name)
    if value is None and type(headers) is dict:
        for key, item in headers.items():
            if key.lower() == name:
                return item
    return value


def seconds_to_ns(value: Any) -> int | None:
    """Provider seconds (float) to integer ns, rounded; ``None`` when absent, not a number, negative
    (no duration is) or past :data:`MAX_SECONDS` (JSON parsers accept ``Infinity`` and ``NaN``,
    which no comparison passes)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return round(value * 1_000_000_000) if 0 <= value <= MAX_SECONDS else None


def ms_to_ns(value: Any) -> int | None:
    """Provider milliseconds (float, int or numeric string) to integer ns, rounded; ``None`` as for
    :func:`seconds_to_ns`."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return round(value * 1_000_000) if 0 <= value <= MAX_MS else None


def as_int(value: Any) -> int | None:
    """A count (an integer from 0 to :data:`MAX_READ`), or ``None`` for anything else (bools
    included)."""
    if type(value) is int:
        return value if 0 <= value <= MAX_READ else None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_READ:
        return None
    return int(value)


def note(out: Usage, found: bool, path: str, expected: bool) -> None:
    """Record field ``path`` as reported, or as missing when the adapter expected it."""
    if found:
        out.fields_reported.append(path)
    elif expected:
        out.fields_missing.append(path)


def take_int(obj: Any, name: str, path: str, out: Usage, *, expected: bool) -> int | None:
    """Read count ``obj.name`` and note ``path`` (the field's full path) as reported or missing."""
    value = as_int(field_of(obj, name)) if obj is not None else None
    note(out, value is not None, path, expected)
    return value


def take_seconds(obj: Any, name: str, path: str, out: Usage, *, expected: bool) -> int | None:
    """Read ``obj.name`` in seconds as integer ns, noting ``path`` as reported or missing."""
    value = seconds_to_ns(field_of(obj, name)) if obj is not None else None
    note(out, value is not None, path, expected)
    return value


def take_ms(obj: Any, name: str, path: str, out: Usage, *, expected: bool) -> int | None:
    """Read ``obj.name`` in milliseconds as integer ns, noting ``path`` as reported or missing."""
    value = ms_to_ns(field_of(obj, name)) if obj is not None else None
    note(out, value is not None, path, expected)
    return value


def take_ns(obj: Any, name: str, path: str, out: Usage, *, expected: bool) -> int | None:
    """Read ``obj.name`` already in integer ns (Ollama), noting ``path`` as reported or missing."""
    return take_int(obj, name, path, out, expected=expected)


def nonempty_text(value: Any) -> bool:
    """True for a non-empty string: the test every adapter uses for "this chunk has content"."""
    return type(value) is str and value != ""


class BaseAdapter:
    """Defaults shared by every adapter: the name, and no stream hidden inside responses."""

    def __init__(self, name: str) -> None:
        self.name = name

    def find_stream(self, response: Any) -> Any:
        return None

    def extract(self, response: Any, headers: Mapping[str, str] | None = None) -> Usage:
        """Every adapter reads its own response shape; see :class:`ProviderAdapter`."""
        raise NotImplementedError

    def response_attributes(self, response: Any, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        """``extract(...).to_attributes()``; an adapter may build the same dict directly where that
        is measurably cheaper (it runs once per non-streamed call)."""
        return self.extract(response, headers).to_attributes()
