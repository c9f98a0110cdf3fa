"""GitHub-flavoured Markdown: the table, its statistics and a provenance footer,
ready to paste into a governance issue."""

from __future__ import annotations

import polars as pl

from pipeline.evidence.result import EvidenceResult
from pipeline.render.text import provenance_lines, stat_lines, table_cells


def render_markdown(result: EvidenceResult) -> str:
    """``### title``, the table (or ``_no rows_``), statistics as bullets, notes
    as paragraphs, then after a rule the provenance footer as bullets."""
    blocks = [f"### {result.title}", frame_markdown(result.rows)]
    if result.stats:
        blocks.append("\n".join(f"- {line}" for line in stat_lines(result.stats)))
    blocks += result.notes
    if result.provenance is not None:
        lines = provenance_lines(result.provenance, quote_command=_inline_code)
        # The rule keeps the footer list apart from the statistics list; a blank
        # line before it stops GitHub reading the previous line as a heading.
        blocks += ["---", "\n".join(f"- {line}" for line in lines)]
    return "\n\n".join(blocks)


def frame_markdown(rows: pl.DataFrame) -> str:
    """A GitHub table of ``rows`` (or ``_no rows_``), numbers formatted as in evidence tables."""
    if rows.height == 0:
        return "_no rows_"
    header, numeric, body = table_cells(rows)
    lines = [
        _row(header),
        _row(["---:" if is_numeric else "---" for is_numeric in numeric]),
        *(_row(cells) for cells in body),
    ]
    return "\n".join(lines)


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(_escape(cell) for cell in cells) + " |"


def _inline_code(text: str) -> str:
    # A command that itself holds backticks needs a longer fence.
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _escape(cell: str) -> str:
    # A pipe ends the cell and a newline ends the row in a GitHub table.
    return cell.replace("|", "\\|").replace("\r\n", " ").replace("\n", " ")
