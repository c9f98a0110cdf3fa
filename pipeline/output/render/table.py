"""Plain terminal rendering (no colours) for the CLI."""

from __future__ import annotations

import io
import shutil

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from pipeline.core.text import visible
from pipeline.evidence.result import EvidenceResult
from pipeline.output.render.text import provenance_lines, stat_lines, table_cells


def render_table(result: EvidenceResult, width: int | None = None) -> str:
    """Title, a rich table of the rows, statistics, notes and provenance as plain
    text. ``width`` defaults to the terminal's (120 columns when there is none)."""
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width or shutil.get_terminal_size((120, 24)).columns,
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
            table.add_column(Text(name), justify="right" if is_numeric else "left")
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
