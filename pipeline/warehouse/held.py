"""The one check of a value that names a host, epoch, build or escrow, wherever it enters.

Options, named-query parameters, the run configuration, builds.toml entries, `ingest-logs --host`, the
network options: each calls `check_value`. A malformed value is refused as such; a well-formed one the
warehouse does not hold is refused with what it holds (a typo must not become a citable "this host did
nothing"). An all-upper-case address (bech32 allows it) is folded to lower case, never kept as typed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from pipeline.core.address import malformed
from pipeline.core.errors import UserError
from pipeline.core.paths import sql_text
from pipeline.core.times import iso_utc

if TYPE_CHECKING:  # reading a config checks its host without loading DuckDB (tests/ingest/test_kinds.py)
    import duckdb

Kind = Literal["host", "slot_host", "epoch", "build", "escrow"]
CLOSEST = 3  # held values named in a refusal, nearest first


class UnheldValue(UserError):
    """A value naming a host, epoch, build or escrow that is malformed or not in the warehouse; one line."""


def check_value(con: duckdb.DuckDBPyConnection | None, kind: Kind, value: object, option: str) -> object:
    """`value` given as `option`, checked and normalised (an address in lower case, an epoch as an int).

    ``host``: any address the warehouse holds (slots, builds, logs, PoC, tracker); ``slot_host``: an
    address holding a slot in the escrows (whose reports mean something); ``epoch``: an epoch of the
    escrows or the tracker's ledger; ``build``: a label of the build timeline; ``escrow``: an escrow id.
    With `con` None only the form is checked (a config read before any warehouse)."""
    if kind in ("host", "slot_host"):
        return _host(con, str(value), option, slots_only=kind == "slot_host")
    checker: Callable[[duckdb.DuckDBPyConnection | None, object, str], object] = {
        "epoch": _epoch,
        "build": _build,
        "escrow": _escrow,
    }[kind]
    return checker(con, value, option)


def well_formed_address(text: str, option: str) -> str:
    """`text` as a ``gonka1…`` address in lower case; `UnheldValue` when malformed."""
    text = text.strip()
    if refusal := malformed(option, text):
        raise UnheldValue(refusal)
    return text.lower()


def _host(con: duckdb.DuckDBPyConnection | None, text: str, option: str, *, slots_only: bool) -> str:
    held = [] if con is None else _held_hosts(con, text.strip().lower(), slots_only)
    if refusal := malformed(option, text.strip()):
        closest = f"; closest in the warehouse: {held[0]}" if held else ""
        raise UnheldValue(refusal + closest)
    host = text.strip().lower()
    if con is None or host in held:
        return host
    where = "holds no slot in the warehouse's escrows" if slots_only else "is not in the warehouse"
    if not held:
        raise UnheldValue(f"host {host} {where}; it holds no host yet (ingest a copy first)")
    holders = "slot holder" if slots_only else "host"
    raise UnheldValue(
        f"host {host} {where}; it holds {_count(len(held), holders)}, closest: {', '.join(held[:CLOSEST])}"
    )


def _held_hosts(con: duckdb.DuckDBPyConnection, host: str, slots_only: bool) -> list[str]:
    if slots_only:
        sql = "SELECT DISTINCT address AS host, levenshtein(address, $host) AS d FROM escrow_slots ORDER BY d, host"
        return fetch_frame(con, sql, {"host": host})["host"].to_list()
    return fetch_frame(con, sql_text("evidence/held_hosts.sql"), {"host": host})["host"].to_list()


def _epoch(con: duckdb.DuckDBPyConnection | None, value: object, option: str) -> int:
    text = str(value).strip()
    if not text.isdigit() or isinstance(value, bool):
        raise UnheldValue(f"{option} {value!r} is not an epoch number")
    epoch = int(text)
    if con is None:
        return epoch
    epochs = held_epochs(con)
    if epoch not in epochs:
        first, last = fetch_frame(con, sql_text("evidence/held_span.sql")).row(0)
        raise UnheldValue(f"epoch {epoch} is not in the warehouse: it holds {held_description(epochs, first, last)}")
    return epoch


def held_epochs(con: duckdb.DuckDBPyConnection) -> list[int]:
    return [int(e) for e in fetch_frame(con, sql_text("evidence/held_epochs.sql"))["epoch_id"].to_list()]


def _build(con: duckdb.DuckDBPyConnection | None, value: object, option: str) -> str:
    label = str(value)
    if con is None:
        return label
    builds = fetch_frame(con, "SELECT DISTINCT build FROM host_builds ORDER BY build")["build"].to_list()
    if label not in builds:
        held = f"it holds {', '.join(repr(b) for b in builds)}" if builds else "it holds no build timeline yet"
        raise UnheldValue(f"{option} {label!r} is not a build of the warehouse's timeline: {held}")
    return label


def _escrow(con: duckdb.DuckDBPyConnection | None, value: object, option: str) -> str:
    escrow = str(value).strip()
    if not escrow:
        raise UnheldValue(f"{option} is empty: an escrow id was expected")
    if con is None:
        return escrow
    held = fetch_frame(con, "SELECT DISTINCT escrow_id FROM escrows ORDER BY escrow_id")["escrow_id"].to_list()
    if escrow not in [str(e) for e in held]:
        shown = ", ".join(str(e) for e in held[:5]) + (", …" if len(held) > 5 else "")
        raise UnheldValue(f"escrow {escrow} is not in the warehouse: it holds {_count(len(held), 'escrow')} ({shown})")
    return escrow


def held_description(epochs: list[int], first: dt.datetime | None, last: dt.datetime | None) -> str:
    """``epochs 2–4 (2026-10-19T07:13:23Z to 2026-10-30T03:22:22Z)``; ``no data yet`` for an empty warehouse."""
    span = f"{iso_utc(first)} to {iso_utc(last)}" if first is not None and last is not None else None
    if not epochs:
        return f"no epoch, data from {span}" if span else "no data yet (ingest a copy first)"
    text = ("epoch " if len(epochs) == 1 else "epochs ") + _ranges(epochs)
    return f"{text} ({span})" if span else text


def _ranges(numbers: list[int]) -> str:
    """``[2, 3, 4, 7]`` → ``2–4, 7``."""
    parts: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        parts.append(str(start) if start == prev else f"{start}–{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(parts)


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def fetch_frame(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any] | None = None) -> Any:
    from pipeline.warehouse.database import fetch_frame as fetch

    return fetch(con, sql, params)
