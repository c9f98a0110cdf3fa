"""Writers of the accounting ledger (docs/sources.md, accounting ledger): PostgreSQL rows and SQLite accounting.db."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg

from pipeline.core.paths import sql_text

from .ledger import LedgerCopy

PG_TABLES = (
    "accounting_meta",
    "accounting_migration",
    "accounting_writers",
    "accounting_escrow_state",
    "accounting_escrow_counters",
    "accounting_escrow_slot_counts",
    "accounting_escrow_host_stats",
    "accounting_escrow_invalid_nonces",
    "accounting_escrow_protocol_nonces",
    "accounting_escrow_challenges",
)


def write_accounting_postgres(
    ledger: LedgerCopy, conninfo: str, tables_absent: tuple[str, ...] = (), invalid_slot: bool = True
) -> None:
    """The row layout; an older ledger lacks `tables_absent` and the invalid set's slot column."""
    rows = ledger.postgres_rows()
    with psycopg.connect(conninfo) as connection, connection.cursor() as cursor:
        cursor.execute(sql_text("upstream/postgres_accounting.sql"))
        for table in tables_absent:
            cursor.execute(f"DROP TABLE {table}")
        if not invalid_slot:
            cursor.execute("ALTER TABLE accounting_escrow_invalid_nonces DROP COLUMN slot_id")
        if any(r["protocol_validated"] is not None for r in rows["accounting_escrow_host_stats"]):
            cursor.execute(  # a ledger of PR #1757's build
                "ALTER TABLE accounting_escrow_host_stats ADD COLUMN protocol_validated BIGINT, "
                "ADD COLUMN protocol_finished BIGINT"
            )
        else:
            for row in rows["accounting_escrow_host_stats"]:
                del row["protocol_validated"], row["protocol_finished"]
        for table in PG_TABLES:
            if not rows.get(table) or table in tables_absent:
                continue
            columns = [
                c
                for c in rows[table][0]
                if invalid_slot or table != "accounting_escrow_invalid_nonces" or c != "slot_id"
            ]
            with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                for row in rows[table]:
                    if not invalid_slot and row.get("slot_id", 0) < 0:
                        continue  # legacy dedupe rows came with the slot column
                    copy.write_row([row[c] for c in columns])


def write_accounting_db(ledger: LedgerCopy, path: Path) -> Path:
    path.unlink(missing_ok=True)
    connection = sqlite3.connect(path)
    try:
        connection.execute("PRAGMA journal_mode=DELETE")
        connection.executescript(sql_text("upstream/sqlite_accounting.sql"))
        connection.executemany(
            "INSERT INTO accounting_meta (key, value) VALUES (?, ?)",
            [
                ("schema_version", str(ledger.schema_version)),
                ("updated_at", "2026-10-21T10:00:00.123456789Z"),
                ("writer_errors", "0"),
            ],
        )
        connection.executemany(
            "INSERT INTO accounting_escrows (escrow_id, creation_epoch, model, payload) VALUES (?, ?, ?, ?)",
            [(b["escrow_id"], b["creation_epoch"], b["model"], b["payload"]) for b in ledger.sqlite_blobs()],
        )
        connection.commit()
    finally:
        connection.close()
    return path
