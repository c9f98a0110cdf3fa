"""An unrelated copy is not a fork: escrow ids that collide with another escrow's are refused.

Escrow ids are small numbers that another network (or another devshard) reuses. A copy whose session row
for an escrow the warehouse holds (settled or not) names another creator, config or group is a different
escrow under the same id: merging it would replay its diffs as forks of the stored escrow and rewrite a
closed epoch, or mix two networks' escrows in the open one. Such a copy is refused before anything is
written, in one line naming the escrows.
"""

from __future__ import annotations

import json
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa

from pipeline.sources.errors import SourceError
from pipeline.sources.store.base import TABLES, SessionStore
from pipeline.warehouse.database import fetch_frame

IDENTITY = ("creator_addr", "config_json", "group_json")  # what an escrow is, whatever its progress
NAMED = 5  # escrows named in the refusal


def refuse_unrelated_escrows(con: duckdb.DuckDBPyConnection, store: SessionStore) -> None:
    """`SourceError` when a session of `store` reuses the id of an escrow the warehouse holds with another
    creator, config or group (JSON compared as values, not text)."""
    stored = _held_identities(con)
    if not stored:
        return
    clashes: list[tuple[str, str]] = []
    for epoch_id in store.epochs():
        if store.columns("sessions", epoch_id) is None:
            continue  # the ingest names an epoch without its sessions table
        try:
            batches = list(store.read("sessions", epoch_id))
        except Exception:  # noqa: BLE001 - an unreadable table is the ingest's to report, in its run
            continue
        if not batches:
            continue
        rows = pa.Table.from_batches(batches, TABLES["sessions"].schema)
        for row in pl.from_arrow(rows).select("escrow_id", *IDENTITY).iter_rows(named=True):  # type: ignore[union-attr]
            held = stored.get(row["escrow_id"])
            if held is not None and (differs := identity_differs(held, row)):
                clashes.append((row["escrow_id"], differs))
    if clashes:
        raise SourceError(
            unrelated_copy(store.display, clashes, "the warehouse", "nothing was ingested (use another warehouse)")
        )


def unrelated_copy(display: str, clashes: list[tuple[str, str]], held_in: str, consequence: str) -> str:
    """The one-line refusal of a copy whose escrow ids name other escrows than `held_in`'s (escrow, what
    differs), the first `NAMED` of them by id."""
    unique = sorted(set(clashes))
    names = ", ".join(f"{escrow} ({what})" for escrow, what in unique[:NAMED])
    more = f" and {len(unique) - NAMED} more" if len(unique) > NAMED else ""
    return (
        f"{display}: escrow ids of escrows in {held_in} name other escrows in this copy: {names}{more}; "
        f"an unrelated copy is not a fork: {consequence}"
    )


def _held_identities(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
    """Escrow id → its identity as the warehouse holds it (a part any copy gave; an escrow's identity never
    changes, only its progress)."""
    sql = (
        "SELECT escrow_id, any_value(creator_addr) AS creator_addr, any_value(config_json) AS config_json, "
        "any_value(group_json) AS group_json FROM raw_sessions GROUP BY escrow_id"
    )
    return {r["escrow_id"]: r for r in fetch_frame(con, sql).iter_rows(named=True)}


def identity_differs(held: dict[str, Any], row: dict[str, Any]) -> str | None:
    """Which part of the identity differs ("creator", "config", "group"), None when none does; a part the
    copy lacks (NULL) is not a difference."""
    parts = [
        name.removesuffix("_addr").removesuffix("_json")
        for name in IDENTITY
        if row[name] is not None and held[name] is not None and _value(row[name]) != _value(held[name])
    ]
    return ", ".join(parts) or None


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text
