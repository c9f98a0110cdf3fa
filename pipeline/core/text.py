"""Text that comes from outside (labels, file names, ids, what a log quotes) made visible: it is data, so
no character of it may act on the terminal or the reader's view. Control characters (an ANSI escape
sequence starts with one), DEL, the C1 controls, the line and paragraph separators and the bidirectional
overrides become escapes a reader sees (``\\x1b``, ``\\u202e``); nothing else changes."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

# C0 controls but tab and line feed, DEL, C1, the Unicode line and paragraph separators (a line break to
# editors and to str.splitlines), the bidirectional embeddings/overrides/isolates, and the noncharacters
# U+FFFE and U+FFFF (with the C0 controls, what XML refuses: an SVG text holding one crashes the renderer).
HIDDEN_CHARACTERS = "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufffe\uffff]"
_HIDDEN = re.compile(HIDDEN_CHARACTERS)
_HIDDEN_ONE_LINE = re.compile(_HIDDEN.pattern[:-1] + "\t\n]")


def escape(character: str) -> str:
    """One character as the escape a reader sees (``\\x1b``, ``\\u202e``, ``\\U0001f680``)."""
    code = ord(character)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _escape(match: re.Match) -> str:
    return escape(match.group())


def visible(text: str, *, one_line: bool = False) -> str:
    """`text` with every character that could act on a terminal or hide text shown as an escape; with
    `one_line`, tabs and line feeds too (a field that must stay on its line)."""
    return (_HIDDEN_ONE_LINE if one_line else _HIDDEN).sub(_escape, text)


def visible_strings(value: Any, shown: Callable[[str], str] = visible) -> Any:
    """`value` (a chart's Vega-Lite spec: dicts, lists, strings) with every string, keys too, as `shown`
    (by default `visible`) shows it: a label's control character reaches a chart as an escape, never the
    renderer's XML."""
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, dict):
        return {shown(k) if isinstance(k, str) else k: visible_strings(v, shown) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [visible_strings(v, shown) for v in value]
    return value


# The longest label (a build's, a source's) taken: a name for a human, shown in tables, footers and charts.
# A longer one (100,000 characters) is refused in one line rather than carried into every output.
MAX_LABEL_CHARS = 200


def label_refusal(label: str, where: str) -> str | None:
    """The one-line refusal of a label too long to be a name (None: fine)."""
    if len(label) > MAX_LABEL_CHARS:
        return f"{where}: a label of {len(label):,} characters; at most {MAX_LABEL_CHARS} are taken"
    return None
