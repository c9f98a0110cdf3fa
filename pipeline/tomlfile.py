"""Reading the project's TOML files (run config, build timeline) with one-line errors."""

from __future__ import annotations

import tomllib
from pathlib import Path


def read_toml(path: Path, error: type[Exception], what: str = "file") -> dict:
    """The parsed document, or `error` with a one-line message when it is missing or not TOML."""
    if not path.exists():
        raise error(f"{path}: no such {what}")
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}: not valid TOML ({exc})") from None
