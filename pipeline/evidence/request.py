"""A request checked against what the warehouse holds before any table is computed.

A host or window the warehouse does not hold is a user error naming what it does hold (a typo must not
become a citable "this host did nothing"); an address that is not a well-formed ``gonka1…`` bech32
address is refused as such. A held host with no rows in a held window still gets its table.
"""

from __future__ import annotations

import duckdb

from pipeline.core.paths import sql_text
from pipeline.evidence.window import EvidenceError, Window
from pipeline.warehouse.database import fetch_frame
from pipeline.warehouse.held import UnheldValue, check_value, held_description, held_epochs


def check_request(con: duckdb.DuckDBPyConnection, host: str | None, window: Window) -> str | None:
    """Raise `EvidenceError` unless ``host`` (when given) and ``window`` are in the warehouse; the host as
    the warehouse spells it (an all-upper-case address folded to lower case)."""
    if host is not None:
        host = check_host(con, host)
    check_window(con, window)
    return host


def check_host(con: duckdb.DuckDBPyConnection, host: str, option: str = "--host") -> str:
    try:
        return str(check_value(con, "host", host, option))
    except UnheldValue as exc:
        raise EvidenceError(str(exc)) from None


def check_window(con: duckdb.DuckDBPyConnection, window: Window) -> None:
    if window.epoch is None and window.since is None:
        return  # all data
    epochs = held_epochs(con)
    if window.epoch is not None and window.epoch in epochs:
        return
    first, last = fetch_frame(con, sql_text("evidence/held_span.sql")).row(0)
    if window.since is not None and window.until is not None and first is not None:
        if window.since <= last and window.until > first:
            return  # overlaps the data: an empty table there is a finding, not a typo
    what = f"epoch {window.epoch}" if window.epoch is not None else f"window {window.describe()}"
    raise EvidenceError(f"{what} is not in the warehouse: it holds {held_description(epochs, first, last)}")
