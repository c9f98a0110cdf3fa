"""Text that comes from outside (labels, file names, ids, what a log quotes) made visible: it is data, so
no character of it may act on the terminal or the reader's view. Control characters (an ANSI escape
sequence starts with one), DEL, the C1 controls, the line and paragraph separators and the bidirectional
overrides become escapes a reader sees (``\\x1b``, ``\\u202e``); nothing else changes."""

from __future__ import annotations

import re

# C0 controls but tab and line feed, DEL, C1, the Unicode line and paragraph separators (a line break to
# editors and to str.splitlines) and the bidirectional embeddings/overrides/isolates.
HIDDEN_CHARACTERS = "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
_HIDDEN = re.compile(HIDDEN_CHARACTERS)
_HIDDEN_ONE_LINE = re.compile(_HIDDEN.pattern[:-1] + "\t\n]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, *, one_line: bool = False) -> str:
    """`text` with every character that could act on a terminal or hide text shown as an escape; with
    `one_line`, tabs and line feeds too (a field that must stay on its line)."""
    return (_HIDDEN_ONE_LINE if one_line else _HIDDEN).sub(_escape, text)


# The longest label (a build's, a source's) taken: a name for a human, shown in tables, footers and charts.
# A longer one (100,000 characters) is refused in one line rather than carried into every output.
MAX_LABEL_CHARS = 200


def label_refusal(label: str, where: str) -> str | None:
    """The one-line refusal of a label too long to be a name (None: fine)."""
    if len(label) > MAX_LABEL_CHARS:
        return f"{where}: a label of {len(label):,} characters; at most {MAX_LABEL_CHARS} are taken"
    return None
