"""Plain terminal rendering (no colours) for the CLI."""

from __future__ import annotations

import io
import shutil
import sys

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from pipeline.core.text import visible
from pipeline.evidence.result import EvidenceResult
from pipeline.output.render.text import provenance_lines, stat_lines, table_cells


def render_table(result: EvidenceResult, width: int | None = None) -> str:
    """Title, a rich table of the rows, statistics, notes and provenance as plain
    text. ``width`` defaults to the terminal's; off a terminal (piped, a file) to whatever the widest
    row and line need. A cell is never cut: a column too narrow folds its cells onto more lines."""
    if width is None:
        width = shutil.get_terminal_size((120, 24)).columns if _stdout_is_terminal() else _natural_width(result)
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width,
        color_system=None,
        force_terminal=False,
        highlight=False,
        emoji=False,
    )
    # Text objects throughout: labels like "[since, until)" are not rich markup.
    console.print(Text(result.title))
    if result.rows.height == 0:
        console.print(Text("no rows"))
    else:
        header, numeric, body = table_cells(result.rows)
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        for name, is_numeric in zip(header, numeric, strict=True):
            table.add_column(Text(name), justify="right" if is_numeric else "left", overflow="fold")
        for cells in body:
            table.add_row(*(Text(visible(cell, one_line=True)) for cell in cells))  # data: never acts on a terminal
        console.print(table)
    remarks = [*stat_lines(result.stats), *result.notes]
    if remarks:
        console.print()
    for line in remarks:
        console.print(Text(visible(line)))
    if result.provenance is not None:
        console.print()
        for line in provenance_lines(result.provenance):
            console.print(Text(visible(line)))
    text = buffer.getvalue()
    return "\n".join(line.rstrip() for line in text.splitlines()).strip("\n")


def _stdout_is_terminal() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):  # no stdout, or a closed one
        return False


def _natural_width(result: EvidenceResult) -> int:
    """The width at which nothing wraps: every column as wide as its widest cell (two spaces between
    columns, as box.SIMPLE_HEAD pads them) and every line of text whole."""
    lines = [result.title, *stat_lines(result.stats), *result.notes]
    if result.provenance is not None:
        lines += provenance_lines(result.provenance)
    widest_line = max((Text(line).cell_len for line in lines), default=0)
    if result.rows.height == 0:
        return max(80, widest_line)
    header, _, body = table_cells(result.rows)
    columns = [max(Text(cell).cell_len for cell in column) for column in zip(header, *body, strict=True)]
    return max(80, widest_line, sum(columns) + 2 * len(columns))
