"""``python -m bench [NAME ...]``: run every benchmark module in this folder (or the named ones).

A benchmark module defines ``run(report: Report) -> None`` and records figures with
``report.add``; the figures are printed as they come and as one table at the end.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Figure:
    module: str
    name: str
    value: float
    unit: str
    note: str = ""
    ratio: float | None = None
    """Against the module's baseline measured in the same run, when there is one."""


@dataclass
class Report:
    """What benchmarks write to; printing is the runner's job."""

    module: str = ""
    figures: list[Figure] = field(default_factory=list)

    def add(
        self, name: str, value: float, unit: str = "", note: str = "", ratio: float | None = None
    ) -> None:
        self.figures.append(Figure(self.module, name, value, unit, note, ratio))
        print(f"  {name}: {value:,.1f} {unit}{f'  ({note})' if note else ''}", flush=True)

    def note(self, text: str) -> None:
        print(f"  {text}", flush=True)


def modules(names: list[str]) -> list[str]:
    here = Path(__file__).resolve().parent
    found = [info.name for info in pkgutil.iter_modules([str(here)]) if not info.name.startswith("_")]
    return [name for name in found if not names or name in names]


def main(argv: list[str]) -> int:
    report = Report()
    for name in modules(argv):
        module = importlib.import_module(f"bench.{name}")
        run = getattr(module, "run", None)
        if run is None:
            continue
        print(f"[{name}]", flush=True)
        report.module = name
        began = time.perf_counter()
        run(report)
        print(f"  ({time.perf_counter() - began:.0f} s)", flush=True)
    print()
    print(table(report.figures))
    return 0


def _value(value: float) -> str:
    return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"


def table(figures: list[Figure]) -> str:
    """The figures as one Markdown table (pasted as is into docs/benchmarks.md)."""
    lines = ["| benchmark | figure | value | unit | ratio | note |", "|---|---|---:|---|---:|---|"]
    for f in figures:
        ratio = f"{f.ratio:.2f}×" if f.ratio is not None else ""
        lines.append(f"| {f.module} | {f.name} | {_value(f.value)} | {f.unit} | {ratio} | {f.note} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
