"""Who is above whom in one trace, found in one pass over its spans.

Trace-level rules ask "which model call is this span inside?" for many spans at once. Walking up
from each span costs the depth of the trace per span, so a deep trace (a chain of thousands of
nested spans) would cost depth²; here one iterative depth-first walk from the roots answers every
question for every span, linear in spans. A span whose parent was never stored starts a tree of
its own (as attribution hangs it under the root); spans in a parent cycle are reached by no walk
and have no ancestors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from latencylens_collector.analysis.records import SpanRow

SpanTest = Callable[[SpanRow], bool]


class Lineage:
    """Ancestry facts of one trace's spans, all computed when the lineage is built.

    ``is_call`` says which spans are model calls; ``passable`` which spans may stand between a
    model call and the call nested in it (application work such as HTTP client spans).
    """

    def __init__(self, spans: Sequence[SpanRow], is_call: SpanTest, passable: SpanTest) -> None:
        self.by_id: dict[bytes, SpanRow] = {row.span_id: row for row in spans}
        self.order: list[bytes] = []
        """Span ids in depth-first preorder: every span comes after all of its ancestors."""
        self._enter: dict[bytes, int] = {}
        self._exit: dict[bytes, int] = {}
        self._nearest_call: dict[bytes, bytes | None] = {}
        self._chain_call: dict[bytes, bytes | None] = {}
        self._walk(is_call, passable)

    def nearest_call(self, span_id: bytes) -> bytes | None:
        """The nearest ancestor that is a model call, whatever lies between."""
        return self._nearest_call.get(span_id)

    def chain_call(self, span_id: bytes) -> bytes | None:
        """The nearest ancestor that is a model call, when only passable spans lie between."""
        return self._chain_call.get(span_id)

    def is_ancestor(self, ancestor: bytes, span_id: bytes) -> bool:
        """Whether ``ancestor`` is a proper ancestor of ``span_id`` in the stored tree."""
        if ancestor == span_id or ancestor not in self._enter or span_id not in self._enter:
            return False
        return self._enter[ancestor] < self._enter[span_id] and self._exit[span_id] < self._exit[ancestor]

    def _walk(self, is_call: SpanTest, passable: SpanTest) -> None:
        children = _children(self.by_id)
        roots = [
            row.span_id
            for row in self.by_id.values()
            if not row.has_parent or row.parent_span_id not in self.by_id or row.parent_span_id == row.span_id
        ]
        clock = 0
        for root in roots:
            self._nearest_call[root] = None
            self._chain_call[root] = None
            stack: list[tuple[bytes, bool]] = [(root, False)]
            while stack:
                span_id, leaving = stack.pop()
                if leaving:
                    self._exit[span_id] = clock
                    clock += 1
                    continue
                if span_id in self._enter:
                    continue
                self._enter[span_id] = clock
                clock += 1
                self.order.append(span_id)
                stack.append((span_id, True))
                row = self.by_id[span_id]
                call = is_call(row)
                nearest = span_id if call else self._nearest_call[span_id]
                chain = span_id if call else (self._chain_call[span_id] if passable(row) else None)
                for child in children.get(span_id, ()):
                    if child not in self._enter:
                        self._nearest_call[child] = nearest
                        self._chain_call[child] = chain
                        stack.append((child, False))


def _children(by_id: Mapping[bytes, SpanRow]) -> dict[bytes, list[bytes]]:
    children: dict[bytes, list[bytes]] = {}
    for row in by_id.values():
        if row.has_parent and row.parent_span_id != row.span_id and row.parent_span_id in by_id:
            children.setdefault(row.parent_span_id, []).append(row.span_id)
    return children
