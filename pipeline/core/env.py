"""The `GONKA_EVIDENCE_*` tuning variables, read when used and checked: a bad value is a one-line
`EnvError` naming the variable, never a traceback from the place that would have used it."""

from __future__ import annotations

import os
import re

from pipeline.core.errors import UserError

# A size as DuckDB takes it (`memory_limit`, `max_temp_directory_size`): a number and a unit.
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(b|kb|mb|gb|tb|kib|mib|gib|tib)", re.IGNORECASE)
_UNIT_BYTES = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNIT_BYTES |= {"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
MIN_SIZE_BYTES = 1_000_000  # below a megabyte DuckDB cannot run a query at all


class EnvError(UserError, ValueError):
    """A `GONKA_EVIDENCE_*` variable holds a value that cannot be used; one-line message."""


def env_text(name: str) -> str | None:
    """The variable's value with its spaces trimmed; None when unset or empty."""
    value = os.environ.get(name, "").strip()
    return value or None


def env_size(name: str, default: str) -> str:
    """A size such as ``1GB`` or ``512MiB`` (normalised to DuckDB's spelling), else `default`."""
    value = env_text(name)
    if value is None:
        return default
    m = _SIZE.fullmatch(value)
    if not m or size_bytes(value) < MIN_SIZE_BYTES:
        raise EnvError(f"{name}={value!r}: expected a size of at least 1MB, such as 512MB or 2GB")
    return f"{m.group(1)}{m.group(2).upper().replace('I', 'i')}"


def size_bytes(size: str) -> int:
    """The bytes of a size as `env_size` takes it (``512MB``, ``2GiB``); 0 for text that is no size."""
    m = _SIZE.fullmatch(size.strip())
    return int(float(m.group(1)) * _UNIT_BYTES[m.group(2).lower()]) if m else 0


def env_int(name: str, default: int, low: int, high: int, what: str) -> int:
    """A whole number in [low, high] (`what` says what it counts), else `default`."""
    value = env_text(name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        number = low - 1
    if not low <= number <= high:
        raise EnvError(f"{name}={value!r}: expected a whole number of {what} from {low:,} to {high:,}")
    return number
