"""Reading the project's TOML files (run config, build timeline) with one-line errors."""

from __future__ import annotations

import tomllib
from datetime import date, datetime, time
from pathlib import Path

from pipeline.core import limits


def read_toml(path: Path, error: type[Exception], what: str = "file") -> dict:
    """The parsed document, or `error` with a one-line message when it is missing, unreadable,
    not UTF-8 or not TOML."""
    from pipeline.core.files import FileReadError, read_regular_file

    if not path.exists():
        raise error(f"{path}: no such {what}")
    try:  # opened without blocking: a FIFO or /dev/zero named as a config file is refused, not waited on
        data = read_regular_file(path, limits.limit().toml_bytes)
    except FileReadError as exc:
        raise error(f"{path}: cannot read the {what} ({exc})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None
    deep = f"{path}: nested deeper than {limits.limit().depth} levels (limit: pipeline/core/limits.py)"
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}: not valid TOML ({exc})") from None
    except RecursionError:  # tomllib recurses per nested array or inline table
        raise error(deep) from None
    if limits.depth_of(doc) > limits.limit().depth:
        raise error(deep)
    return doc


def toml_type(value: object) -> str:
    """What a TOML value is, in TOML's words, for messages such as "host must be a string, not an array"."""
    for kind, name in (
        (bool, "a boolean"),
        (str, "a string"),
        (int, "an integer"),
        (float, "a float"),
        (datetime, "a date-time"),
        (date, "a date"),
        (time, "a time"),
        (list, "an array"),
        (dict, "a table"),
    ):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def require_string(value: object, error: type[Exception], where: str) -> str:
    """`value` when it is a TOML string; else `error` naming `where` and what it is instead."""
    if not isinstance(value, str):
        raise error(f"{where} must be a string, not {toml_type(value)}")
    return value
