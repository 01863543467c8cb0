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
MIN_WRAP_WIDTH = 12
"""Narrowest a wrapping text column gets (longer words keep their length)."""
MISSING = "-"
"""Shown for a value that is unknown or does not apply."""
_NS_PER_MS = 1_000_000


def width() -> int:
    """Columns available: ``COLUMNS``, else the terminal's, else :data:`DEFAULT_WIDTH`."""
    return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns


# Values -------------------------------------------------------------------------------------------


def ms(ns: float | None, *, signed: bool = False) -> str:
    """A duration in integer ns as milliseconds with one decimal (``1234.5``); ``-`` when unknown."""
    if ns is None:
        return MISSING
    return f"{ns / _NS_PER_MS:{'+' if signed else ''}.1f}"


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
    """A titled table; the first column is each row's key. ``notes`` are printed under it."""

    title: str
    columns: Sequence[Column]
    rows: list[Sequence[str]] = field(default_factory=list)
    notes: Sequence[str] = ()

    def add(self, *cells: object) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns")
        self.rows.append([str(cell) for cell in cells])


ROW_NUMBER = Column("#", numeric=True)


def render(table: Table, columns: int | None = None) -> str:
    """The table as text at most ``columns`` wide (where any single value allows)."""
    limit = columns or width()
    lines = [table.title, ""] if table.title else []
    lines += _render_body(table.columns, table.rows, limit)
    for note in table.notes:
        lines += textwrap.wrap(note, limit, break_long_words=False, break_on_hyphens=False) or [""]
    return "\n".join(line.rstrip() for line in lines)


def _natural(column: Column, cells: Iterable[str]) -> int:
    return max([len(column.header), *(len(cell) for cell in cells)])


def _narrowest(column: Column, cells: Iterable[str]) -> int:
    """Least width of a column: its natural width, or for wrapping text its longest word."""
    cells = list(cells)
    natural = _natural(column, cells)
    if not column.wraps:
        return natural
    words = [len(column.header), *(len(word) for cell in cells for word in cell.split())]
    return min(natural, max(MIN_WRAP_WIDTH, *words))


def _render_body(columns: Sequence[Column], rows: Sequence[Sequence[str]], limit: int) -> list[str]:
    indexes = list(range(len(columns)))
    cells = [[row[i] for row in rows] for i in indexes]
    if _fits(columns, cells, indexes, limit):
        return _grid(columns, cells, indexes, limit)
    # Blocks of columns, each led by the key (or by a row number when the key is wide).
    key_wide = _natural(columns[0], cells[0]) > limit // 3
    all_columns = [ROW_NUMBER, *columns] if key_wide else list(columns)
    all_cells = [[str(n) for n in range(1, len(rows) + 1)], *cells] if key_wide else cells
    lead = [0]  # the key, or the row number (then the key opens the first block)
    rest = list(range(1, len(all_columns)))
    blocks: list[list[int]] = []
    current: list[int] = []
    for index in rest:
        if current and not _fits(all_columns, all_cells, [*lead, *current, index], limit):
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


def _fits(
    columns: Sequence[Column], cells: Sequence[Sequence[str]], indexes: Sequence[int], limit: int
) -> bool:
    least = sum(_narrowest(columns[i], cells[i]) for i in indexes) + len(GAP) * (len(indexes) - 1)
    return least <= limit


def _widths(
    columns: Sequence[Column], cells: Sequence[Sequence[str]], indexes: Sequence[int], limit: int
) -> list[int]:
    """Natural widths, with wrapping columns narrowed (widest first) until the line fits."""
    widths = [_natural(columns[i], cells[i]) for i in indexes]
    least = [_narrowest(columns[i], cells[i]) for i in indexes]
    excess = sum(widths) + len(GAP) * (len(indexes) - 1) - limit
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
    if not column.wraps or len(text) <= column_width:
        return [text]
    indent = " " * (len(text) - len(text.lstrip(" ")))
    return textwrap.wrap(
        text.lstrip(" "),
        column_width,
        initial_indent=indent,
        subsequent_indent=indent + "  " if len(indent) + 2 < column_width // 2 else indent,
        break_long_words=True,
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
