"""The bounds every input reader holds to, in one place.

An input past one of them is a counted quarantine or a one-line error naming the file and the limit,
never a traceback and never memory that grows with what one line, one name or one document holds.
Readers look the limits up when they read (`LIMITS.line_bytes`), so a test sets smaller ones with
`bounded(...)` and the same code runs.

    from pipeline.core.limits import LIMITS, in_int64, nesting_past
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class Limits:
    # arrays, tables and objects inside each other in a TOML or JSON document (real ones: under 20)
    depth: int = 256
    # the longest log line read: a longer one is cut to this and counted (a prompt echoed whole is under it)
    line_bytes: int = 4 << 20
    # a gzip log inflating to more than `inflate_ratio` times what it read, once past `inflate_floor` bytes,
    # is not read on (real logs inflate 10-30 times)
    inflate_ratio: int = 200
    inflate_floor: int = 4 << 20
    # the largest file a reader holds whole (a PoC result; vLLM logs, validator logs and scrapes stream)
    whole_file_bytes: int = 256 << 20
    # the largest stored answer (payloads/, decompressed) and saved JSON file (decompressed): far above real ones
    payload_bytes: int = 256 << 20
    json_file_bytes: int = 256 << 20
    # a config file or a builds.toml (a few kilobytes when real)
    toml_bytes: int = 16 << 20


LIMITS = Limits()


class PastLimit(Exception):
    """An input past one of the limits, in one line naming it (a reader quarantines the input or stops)."""


@contextmanager
def bounded(**changes: int) -> Iterator[Limits]:
    """Other limits for the block (tests: a 1 GiB case made small)."""
    global LIMITS
    before = LIMITS
    LIMITS = replace(before, **changes)
    try:
        yield LIMITS
    finally:
        LIMITS = before


def limit() -> Limits:
    """The limits in force (a function, so that a reader sees `bounded`'s)."""
    return LIMITS


def in_int64(text: str) -> bool:
    """Whether a decimal integer (a file name, a field) fits a 64-bit integer column."""
    digits = text.lstrip("+-").lstrip("0") or "0"
    if len(digits) > 19:  # past int64 (and never handed to int(), whose digit limit is a ValueError)
        return False
    return INT64_MIN <= int(("-" if text.startswith("-") else "") + digits) <= INT64_MAX


_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


def nesting_past(data: bytes | str, strings: re.Pattern[bytes] = _JSON_STRING) -> int | None:
    """The nesting depth of a JSON (or TOML value) text when it is past `LIMITS.depth`, else None.

    Cheap for the usual document: fewer opening brackets than the limit cannot nest past it. Otherwise its
    strings are set aside (a bracket in a string does not nest) and the depth counted in one pass."""
    raw = data.encode("utf-8", "replace") if isinstance(data, str) else data
    most = limit().depth
    if raw.count(b"[") + raw.count(b"{") <= most:
        return None
    import numpy as np

    bare = np.frombuffer(strings.sub(b'""', raw), np.uint8)
    step = (bare == ord("[")).astype(np.int32) + (bare == ord("{")) - (bare == ord("]")) - (bare == ord("}"))
    depth = int(np.cumsum(step, dtype=np.int64).max(initial=0))
    return depth if depth > most else None


def loads_json(text: str | bytes, **options: Any) -> Any:
    """`json.loads` of a reader's document, nested at most `LIMITS.depth` deep; a ValueError (as for text
    that is not JSON) for one nested deeper, never a RecursionError."""
    import json

    deep = nesting_past(text)
    if deep is not None:
        raise ValueError(f"nested {deep} levels deep, past the limit of {limit().depth} (pipeline/core/limits.py)")
    try:
        return json.loads(text, **options)
    except RecursionError:
        raise ValueError(f"nested past the limit of {limit().depth} levels (pipeline/core/limits.py)") from None


def inflated_past(inflated: int, read: int) -> str | None:
    """Why a compressed input that gave `inflated` bytes for `read` compressed ones is not read on, or None."""
    bounds = limit()
    if inflated > bounds.inflate_floor and inflated > bounds.inflate_ratio * max(read, 1):
        return (
            f"inflates more than {bounds.inflate_ratio} times ({inflated:,} bytes from {read:,}): not read on "
            "(limit: pipeline/core/limits.py)"
        )
    return None


def depth_of(value: object) -> int:
    """The nesting depth of a parsed document (lists and dicts), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            node = list(node.values())
        if isinstance(node, list):
            deepest = max(deepest, level)
            stack += [(child, level + 1) for child in node if isinstance(child, (list, dict))]
    return deepest
