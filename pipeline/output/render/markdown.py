"""GitHub-flavoured Markdown: the table, its statistics and a provenance footer,
ready to paste into a governance issue.

Text that comes from the data (build labels, host addresses, source labels, error messages)
is untrusted: it goes through `escape` (or `inline_code`) so that it can neither inject HTML
(``<script>``, ``<img onerror=…>``) nor form a link (``[x](javascript:…)``) nor end a table
cell or a line.
"""

from __future__ import annotations

import re

import polars as pl

from pipeline.core.text import HIDDEN_CHARACTERS, visible
from pipeline.evidence.result import EvidenceResult
from pipeline.output.render.text import provenance_lines, stat_lines, table_cells

# HTML needs "<" before a letter, "/", "!" or "?" (tags, comments, autolinks) and "&" before a
# letter or "#" (entities); a link needs "](" (inline) or "]:" (a reference definition, without
# which "[x]" and "[x][y]" are plain text). Emphasis and strikethrough need "*", "~" or an "_" at a
# word's edge (one inside a word, as in processed_logprobs, is plain text). A backslash is escaped too, so
# that one from the data cannot cancel the escapes that follow it. Everything else ("p < 0.001", and "`",
# whose code spans the notes use for commands) stays as is; `literal`, for text that is all data (cells,
# provenance values), escapes "`" too: in a code span the escapes above would show as backslashes.
_HTML = {"&": "&amp;", "<": "&lt;"}
_BACKSLASHED = ("\\", "]", "*", "~", "_")
# Control characters (an ANSI sequence starts with one) and bidirectional overrides are shown as escapes.
_SPECIAL = re.compile(
    r"\\|<(?=[A-Za-z/!?])|&(?=[A-Za-z#])|\](?=[(:])|[*~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])|\r\n|[\r\n]|"
    + HIDDEN_CHARACTERS
)


def escape(text: str) -> str:
    """``text`` as literal Markdown inline text on one line."""
    return _SPECIAL.sub(_escaped, str(text))


def _escaped(match: re.Match) -> str:
    char = match.group()
    if char in _HTML:
        return _HTML[char]
    if char in ("\r\n", "\r", "\n"):
        return " "
    if char not in _BACKSLASHED:
        return visible(char)
    return "\\" + char  # "\\", "]", "*", "~" or "_": shown as itself


def literal(text: str) -> str:
    """``text`` from the data as literal Markdown inline text: `escape`, and a backtick opens no code span."""
    return escape(text).replace("`", "\\`")


def cell(text: str) -> str:
    """``text`` as the content of a table cell: literal, and a pipe no longer ends the cell."""
    return literal(text).replace("|", "\\|")


def inline_code(text: str) -> str:
    """``text`` as a code span: literal whatever it holds (a fence longer than any backtick run in it)."""
    text = visible(" ".join(str(text).splitlines()), one_line=True)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if "`" in text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def heading_anchor(heading: str) -> str:
    """The fragment GitHub links a heading by: lower case, punctuation dropped (hyphens and underscores
    kept), each space a hyphen; ``4. Peer invalidation in the epoch's escrows`` →
    ``4-peer-invalidation-in-the-epochs-escrows``. Unique headings only (GitHub numbers repeats)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def render_markdown(result: EvidenceResult) -> str:
    """``### title``, the table (or ``_no rows_``), statistics as bullets, notes
    as paragraphs, then after a rule the provenance footer as bullets."""
    blocks = [f"### {escape(result.title)}", frame_markdown(result.rows)]
    if result.stats:
        blocks.append("\n".join(f"- {escape(line)}" for line in stat_lines(result.stats)))
    blocks += [escape(note) for note in result.notes]
    if result.provenance is not None:
        lines = provenance_lines(result.provenance, quote_command=inline_code, quote_text=literal)
        # The rule keeps the footer list apart from the statistics list; a blank
        # line before it stops GitHub reading the previous line as a heading.
        blocks += ["---", "\n".join(f"- {line}" for line in lines)]
    return "\n\n".join(blocks)


def frame_markdown(rows: pl.DataFrame) -> str:
    """A GitHub table of ``rows`` (or ``_no rows_``), numbers formatted as in evidence tables."""
    if rows.height == 0:
        return "_no rows_"
    return markdown_table(rows)


def markdown_table(rows: pl.DataFrame) -> str:
    """A GitHub table of ``rows``: header, alignment row (numbers right-aligned), one line per row."""
    header, numeric, body = table_cells(rows)
    lines = [
        _row(header),
        "| " + " | ".join("---:" if is_numeric else "---" for is_numeric in numeric) + " |",
        *(_row(cells) for cells in body),
    ]
    return "\n".join(lines)


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cell(text) for text in cells) + " |"
