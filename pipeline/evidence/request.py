"""A request checked against what the warehouse holds before any table is computed.

A host or window the warehouse does not hold is a user error naming what it does hold (a typo must not
become a citable "this host did nothing"); an address that is not a well-formed ``gonka1…`` bech32
address is refused as such. A held host with no rows in a held window still gets its table.
"""

from __future__ import annotations

import datetime as dt

import duckdb

from pipeline.core.address import malformed
from pipeline.core.paths import sql_text
from pipeline.core.times import iso_utc
from pipeline.evidence.window import EvidenceError, Window
from pipeline.warehouse.database import fetch_frame

CLOSEST = 3  # held hosts named in the error, nearest first


def check_request(con: duckdb.DuckDBPyConnection, host: str | None, window: Window) -> None:
    """Raise `EvidenceError` unless ``host`` (when given) and ``window`` are in the warehouse."""
    if host is not None:
        check_host(con, host)
    check_window(con, window)


def check_host(con: duckdb.DuckDBPyConnection, host: str) -> None:
    held = fetch_frame(con, sql_text("evidence/held_hosts.sql"), {"host": host})["host"].to_list()
    if refusal := malformed("--host", host):
        closest = f"; closest in the warehouse: {held[0]}" if held else ""
        raise EvidenceError(refusal + closest)
    if host in held:
        return
    if not held:
        raise EvidenceError(f"host {host} is not in the warehouse; it holds no host yet (ingest a copy first)")
    closest = ", ".join(held[:CLOSEST])
    raise EvidenceError(
        f"host {host} is not in the warehouse; it holds {_count(len(held), 'host')}, closest: {closest}"
    )


def check_window(con: duckdb.DuckDBPyConnection, window: Window) -> None:
    if window.epoch is None and window.since is None:
        return  # all data
    epochs = [int(e) for e in fetch_frame(con, sql_text("evidence/held_epochs.sql"))["epoch_id"].to_list()]
    if window.epoch is not None and window.epoch in epochs:
        return
    first, last = fetch_frame(con, sql_text("evidence/held_span.sql")).row(0)
    if window.since is not None and window.until is not None and first is not None:
        if window.since <= last and window.until > first:
            return  # overlaps the data: an empty table there is a finding, not a typo
    what = f"epoch {window.epoch}" if window.epoch is not None else f"window {window.describe()}"
    raise EvidenceError(f"{what} is not in the warehouse: it holds {held_description(epochs, first, last)}")


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
