"""What an evidence table is: one `EvidenceSpec`, declared by its module and registered once.

A table's module ends with

    SPEC = register(EvidenceSpec(
        name="votes-by-build", summary="…", compute=votes_by_build,
        columns=COLUMNS, sql=("evidence/host_verdict_counts.sql", …),
        description="…", notes="…", report=ReportSection(order=30, chart=_chart),
    ))

where ``COLUMNS`` is a tuple of `Column` (a name with its definition), and everything else reads the
spec: `compute` (which options a table accepts), the `evidence` command (its options and the table
list of its `--help`), the epoch report (order, heading, the options it asks for, the denominators
shown, the chart) and the generated reference docs/evidence.md (summary, description, options,
columns, notes). See docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import polars as pl

from pipeline.evidence.result import EvidenceResult


class Column(str):
    """A column name that carries its definition: ``Column("windows", "stats lines")`` is the string
    ``"windows"`` wherever a name is expected (frame selects, comparisons), and the docs read `meaning`."""

    meaning: str

    def __new__(cls, name: str, meaning: str) -> Column:
        column = super().__new__(cls, name)
        column.meaning = meaning
        return column

    def __getnewargs__(self) -> tuple[str, str]:  # type: ignore[override]  # pickle and copy keep the meaning
        return str(self), self.meaning


def column_group(*names: str, meaning: str) -> tuple[Column, ...]:
    """Several columns with one definition (the reference shows them in one row)."""
    return tuple(Column(name, meaning) for name in names)


@dataclass(frozen=True)
class Option:
    """A table-specific option: the keyword of the computation and its command-line flag."""

    name: str  # keyword argument of the computation, e.g. "by_escrow"
    flag: str  # e.g. "--by-escrow"
    help: str
    type: type = bool  # bool: a flag; int or str: takes a value
    metavar: str | None = None
    without_host: bool = False  # when set, the table needs no --host (it covers every participant)

    @property
    def usage(self) -> str:
        """``--by-escrow`` or ``--compare EPOCH``: how the option is written on the command line."""
        return self.flag if self.type is bool else f"{self.flag} {self.metavar or self.type.__name__.upper()}"


@dataclass(frozen=True)
class ReportContext:
    """What a report section knows besides the table: the epoch and the host's inferences in it."""

    epoch: int
    host: str
    executed_by_epoch: Mapping[int, int]  # inferences the host executed per epoch (any final status)


@dataclass(frozen=True)
class ReportSection:
    """How a table appears in the epoch report."""

    order: int  # position among the report's evidence sections (and in the table list)
    heading: str | None = None  # default: the name, capitalised ("Votes by build")
    # Options the report asks of the table for an epoch, e.g. per-escrow rows or the previous epoch.
    options: Callable[[int], dict[str, Any]] = lambda epoch: {}
    # The rows as the reader sees them (e.g. counts next to their denominators); default: the rows.
    view: Callable[[EvidenceResult, ReportContext], pl.DataFrame] | None = None
    # A Vega-Lite spec from the result and the view, or None when there is nothing to draw.
    chart: Callable[[EvidenceResult, pl.DataFrame], dict | None] | None = None


@dataclass(frozen=True)
class EvidenceSpec:
    name: str  # public name, e.g. "votes-by-build"
    summary: str  # one line for --help and the docs
    compute: Callable[..., EvidenceResult]  # (con, host, window, **options) -> EvidenceResult
    columns: tuple[Column, ...]  # the columns without options (options may add some, e.g. escrow_id)
    sql: tuple[str, ...]  # the files below sql/ it reads
    options: tuple[Option, ...] = ()
    report: ReportSection | None = None  # None: not in the epoch report
    description: str = field(default="", compare=False)  # what a row is and the window it honours (Markdown)
    notes: str = field(default="", compare=False)  # after the column list: what options add, ordering, statistics

    @property
    def heading(self) -> str:
        return (self.report.heading if self.report else None) or self.name.replace("-", " ").capitalize()

    def option(self, name: str) -> Option | None:
        return next((o for o in self.options if o.name == name), None)


_REGISTRY: dict[str, EvidenceSpec] = {}


def register(spec: EvidenceSpec) -> EvidenceSpec:
    """Add `spec` to the registry (`pipeline.evidence.registry` imports every table module once)."""
    if spec.name in _REGISTRY and _REGISTRY[spec.name].compute is not spec.compute:
        raise ValueError(f"evidence table {spec.name!r} is registered twice")
    _REGISTRY[spec.name] = spec
    return spec


def registered() -> Mapping[str, EvidenceSpec]:
    return MappingProxyType(_REGISTRY)
