"""Everything the command line prints: one table style, durations in ms, times in UTC with the zone.

Tables never cut a value. A table wider than the output first wraps its free-text columns (names,
routes) at spaces; if it still does not fit, its columns are split into blocks printed one under
the other, each block led by the row's key (the first column, or a row number when the key itself
is wide, such as a trace id), the way wide data frames are printed. Ids, times and numbers are
never wrapped. The width is the terminal's, ``COLUMNS`` when set, and 80 for anything else (a pipe,
a file), so what a script reads is the same complete text.
"""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, TextIO

DEFAULT_WIDTH = 80
"""Width of output that is not a terminal and has no ``COLUMNS``."""
GAP = "  "
RULE = "─"
COMFORTABLE_WRAP_WIDTH = 20
"""Free text is wrapped to at least this width before a table is split into blocks (and below it
only when a block of one column needs it; a word is never broken)."""
MISSING = "-"
"""Shown for a value that is unknown or does not apply."""
NS_PER_MS = 1_000_000
"""Nanoseconds in a millisecond: durations travel as integer ns and are shown in ms."""


def width() -> int:
    """Columns available: ``COLUMNS``, else the terminal's, else :data:`DEFAULT_WIDTH`."""
    return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns


# Values -------------------------------------------------------------------------------------------


def ms(ns: float | None, *, signed: bool = False) -> str:
    """A duration in integer ns as milliseconds with one decimal (``1234.5``); ``-`` when unknown."""
    if ns is None:
        return MISSING
    return f"{ns / NS_PER_MS:{'+' if signed else ''}.1f}"


def percent(ratio: float | None) -> str:
    """A 0–1 ratio as a whole percentage; ``-`` when unknown."""
    return MISSING if ratio is None else f"{ratio:.0%}"


def utc(moment: str | int | datetime | None) -> str:
    """A time in UTC to the second, with its zone: ``2025-05-01 12:00:00 UTC``.

    Takes the API's ISO-8601 text, integer ns since the epoch, or a datetime (naive means UTC).
    """
    if moment is None or moment == "":
        return MISSING
    if isinstance(moment, int):
        when = datetime.fromtimestamp(moment / 1e9, tz=timezone.utc)
    elif isinstance(moment, datetime):
        when = moment
    else:
        try:
            when = datetime.fromisoformat(moment.replace("Z", "+00:00"))
        except ValueError:
            return moment
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def one_line(text: str) -> str:
    """Text with every run of whitespace (newlines too) made one space."""
    return " ".join(str(text).split())


# Tables -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """A table column. ``numeric`` columns are right-aligned; only ``wraps`` columns (free text)
    may break across lines, at spaces."""

    header: str
    numeric: bool = False
    wraps: bool = False


@dataclass
class Table:
    """A titled table whose first ``keys`` columns name each row. ``notes`` are printed under it."""

    title: str
    columns: Sequence[Column]
    rows: list[Sequence[str]] = field(default_factory=list)
    notes: Sequence[str] = ()
    keys: int = 1

    def add(self, *cells: object) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns")
        self.rows.append([str(cell) for cell in cells])


ROW_NUMBER = Column("#", numeric=True)


def render(table: Table, columns: int | None = None) -> str:
    """The table as text at most ``columns`` wide (where any single value allows)."""
    limit = columns or width()
    lines = [table.title, ""] if table.title else []
    lines += _render_body(table.columns, table.rows, limit, table.keys)
    for note in table.notes:
        lines += textwrap.wrap(note, limit, break_long_words=False, break_on_hyphens=False) or [""]
    return "\n".join(line.rstrip() for line in lines)


def _natural(column: Column, cells: Iterable[str]) -> int:
    return max([len(column.header), *(len(cell) for cell in cells)])


def _narrowest(column: Column, cells: Iterable[str], comfortable: bool = False) -> int:
    """Least width of a column: its natural width, or for wrapping text its longest word (with
    ``comfortable``, at least :data:`COMFORTABLE_WRAP_WIDTH` too, so text wraps to a few lines)."""
    cells = list(cells)
    natural = _natural(column, cells)
    if not column.wraps:
        return natural
    words = [len(column.header), *(len(word) for cell in cells for word in cell.split())]
    floor = COMFORTABLE_WRAP_WIDTH if comfortable else 0
    return min(natural, max(floor, *words))


def _render_body(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], limit: int, keys: int = 1
) -> list[str]:
    indexes = list(range(len(columns)))
    cells = [[row[i] for row in rows] for i in indexes]
    if _least_width(columns, cells, indexes, comfortable=True) <= limit:
        return _grid(columns, cells, indexes, limit)
    # Blocks of whole columns, each led by the keys (or by a row number when the keys are wide).
    keys_wide = _natural_width(columns, cells, range(keys)) > limit // 3
    all_columns = [ROW_NUMBER, *columns] if keys_wide else list(columns)
    all_cells = [[str(n) for n in range(1, len(rows) + 1)], *cells] if keys_wide else cells
    lead = [0] if keys_wide else list(range(keys))  # with a row number, the keys open block one
    blocks: list[list[int]] = []
    current: list[int] = []
    for index in range(len(lead), len(all_columns)):
        if current and _natural_width(all_columns, all_cells, [*lead, *current, index]) > limit:
            blocks.append(current)
            current = []
        current.append(index)
    if current:
        blocks.append(current)
    lines: list[str] = []
    for number, block in enumerate(blocks):
        if number:
            lines.append("")
        lines += _grid(all_columns, all_cells, [*lead, *block], limit)
    return lines


def _natural_width(columns: Sequence[Column], cells: Sequence[Sequence[str]], indexes: Sequence[int]) -> int:
    return sum(_natural(columns[i], cells[i]) for i in indexes) + len(GAP) * (len(indexes) - 1)


def _least_width(
    columns: Sequence[Column], cells: Sequence[Sequence[str]], indexes: Sequence[int], comfortable: bool
) -> int:
    least = sum(_narrowest(columns[i], cells[i], comfortable) for i in indexes)
    return least + len(GAP) * (len(indexes) - 1)


def _widths(
    columns: Sequence[Column], cells: Sequence[Sequence[str]], indexes: Sequence[int], limit: int
) -> list[int]:
    """Natural widths, with wrapping columns narrowed (widest first) until the line fits: down to
    a comfortable width first, to their longest word only when that is not enough."""
    widths = [_natural(columns[i], cells[i]) for i in indexes]
    excess = sum(widths) + len(GAP) * (len(indexes) - 1) - limit
    for comfortable in (True, False):
        least = [_narrowest(columns[i], cells[i], comfortable) for i in indexes]
        while excess > 0:
            candidates = [k for k in range(len(widths)) if widths[k] > least[k]]
            if not candidates:
                break
            widest = max(candidates, key=lambda k: widths[k] - least[k])
            widths[widest] -= 1
            excess -= 1
    return widths


def _grid(
    columns: Sequence[Column], cells: Sequence[Sequence[str]], indexes: Sequence[int], limit: int
) -> list[str]:
    widths = _widths(columns, cells, indexes, limit)
    chosen = [columns[i] for i in indexes]
    lines = [_line([c.header for c in chosen], chosen, widths)]
    lines.append(GAP.join(RULE * w for w in widths))
    for row in range(len(cells[0]) if cells else 0):
        wrapped = [
            _wrap(cells[i][row], column, w) for i, column, w in zip(indexes, chosen, widths, strict=True)
        ]
        for part in range(max(len(lines_) for lines_ in wrapped)):
            texts = [lines_[part] if part < len(lines_) else "" for lines_ in wrapped]
            lines.append(_line(texts, chosen, widths))
    return lines


def _wrap(text: str, column: Column, column_width: int) -> list[str]:
    """A cell's lines: text of a wrapping column broken at spaces, continuation lines indented two
    more than the first (a span tree's depth is kept) when the longest word still fits."""
    if not column.wraps or len(text) <= column_width:
        return [text]
    indent = " " * (len(text) - len(text.lstrip(" ")))
    longest = max(len(word) for word in text.split())
    hanging = indent + "  " if len(indent) + 2 + longest <= column_width else indent
    return textwrap.wrap(
        text.lstrip(" "),
        column_width,
        initial_indent=indent,
        subsequent_indent=hanging,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [""]


def _line(texts: Sequence[str], columns: Sequence[Column], widths: Sequence[int]) -> str:
    return GAP.join(
        text.rjust(w) if column.numeric else text.ljust(w)
        for text, column, w in zip(texts, columns, widths, strict=True)
    )


def pairs(title: str, items: Sequence[tuple[str, str]]) -> str:
    """``label  value`` lines under a title, labels aligned (a one-record view)."""
    label_width = max((len(label) for label, _ in items), default=0)
    lines = [title, ""] if title else []
    lines += [f"{label.ljust(label_width)}{GAP}{value}" for label, value in items]
    return "\n".join(line.rstrip() for line in lines)


# Printing -----------------------------------------------------------------------------------------


def show(text: str, stream: TextIO | None = None) -> None:
    """Print text to standard output (or ``stream``)."""
    print(text, file=stream or sys.stdout)


def show_json(body: Any) -> None:
    """The service's JSON, indented, as the ``--json`` flag prints it."""
    print(json.dumps(body, indent=2))


def error_line(message: str) -> str:
    """The one spelling of an error: ``error: <one line>``."""
    return f"error: {one_line(message)}"


def note(message: str) -> None:
    """A remark for the person at the terminal (standard error, so pipes get data only)."""
    print(message, file=sys.stderr)
