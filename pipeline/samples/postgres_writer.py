"""PostgreSQL layout (docs/sources.md, PostgreSQL layout and payloads): partitioned `devshard_*` tables and
payload_storage."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import psycopg

from pipeline.core.paths import sql_text

from .spec import CALENDAR_START

if TYPE_CHECKING:  # the copy calls its writers: a type-only import, not a cycle
    from .host_copy import HostCopy

TABLE_NAMES = {
    "sessions": "devshard_sessions",
    "diffs": "devshard_diffs",
    "signatures": "devshard_signatures",
    "snapshots": "devshard_snapshots",
    "sealed_inferences": "devshard_sealed_inferences",
    "slot_validation_obs": "devshard_slot_validation_obs",
    "inference_validation_obs": "devshard_inference_validation_obs",
    "sealed_validation_obs": "devshard_sealed_validation_obs",
    "escrow_epoch": "devshard_session_index",
    "escrow_cache": "devshard_escrow_cache",
}
PARTITIONED = [
    TABLE_NAMES[t]
    for t in (
        "sessions",
        "diffs",
        "signatures",
        "snapshots",
        "sealed_inferences",
        "slot_validation_obs",
        "inference_validation_obs",
        "sealed_validation_obs",
    )
] + ["devshard_validation_leases", "payload_storage"]
# DDL of the steps some release lines add after the common schema (sql/upstream/postgres.sql).
LATER_STEPS = {
    "devshard_storage_challenge": "upstream/postgres_storage_challenge.sql",
    "devshard_connection_lineage": "upstream/postgres_connection_lineage.sql",
}


def _copy_rows(cursor: psycopg.Cursor, table: str, rows: list[dict]) -> None:
    if not rows:
        return
    columns = list(rows[0])
    with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row([row[c] for c in columns])


def write_database(copy: HostCopy, conninfo: str) -> None:
    """Create the schema and load the copy into an existing, empty database, in one transaction."""
    with psycopg.connect(conninfo) as connection, connection.cursor() as cursor:
        line = copy.release_line
        cursor.execute(sql_text("upstream/postgres.sql"))
        cursor.execute(sql_text("upstream/postgres_payloads.sql"))
        for table in line.tables_absent:
            cursor.execute(f"DROP TABLE {table}")
        if not line.imports:
            cursor.execute("ALTER TABLE devshard_sessions DROP COLUMN imported_nonce")
        if line.payload_inference_id_type != "INT":
            cursor.execute(
                f"ALTER TABLE payload_storage ALTER COLUMN inference_id TYPE {line.payload_inference_id_type}"
            )
        for _, name in line.postgres_migrations:
            if name in LATER_STEPS:
                cursor.execute(sql_text(LATER_STEPS[name]))
        for parent in PARTITIONED:
            if parent in line.tables_absent:
                continue
            for epoch in copy.epochs:
                cursor.execute(
                    f"CREATE TABLE {parent}_epoch_{epoch} PARTITION OF {parent} "
                    f"FOR VALUES FROM ({epoch}) TO ({epoch + 1})"
                )
        applied_at = datetime.fromtimestamp(CALENDAR_START - 30 * 86400, UTC).replace(tzinfo=None)
        cursor.executemany(
            "INSERT INTO schema_migrations (id, name, applied_at) VALUES (%s, %s, %s)",
            [(step, name, applied_at) for step, name in line.postgres_migrations],
        )
        if "devshard_storage_identity" not in line.tables_absent:
            cursor.execute(
                "INSERT INTO devshard_storage_identity (singleton, identity) VALUES (true, %s)", (copy.lineage,)
            )
        for table, rows in copy.tables.items():
            if TABLE_NAMES[table] in line.tables_absent:
                continue
            if not line.imports and table == "sessions":
                rows = [{k: v for k, v in row.items() if k != "imported_nonce"} for row in rows]
            _copy_rows(cursor, TABLE_NAMES[table], rows)
        if "devshard_validation_leases" not in line.tables_absent:
            _copy_rows(cursor, "devshard_validation_leases", copy.validation_leases)
        _copy_rows(cursor, "payload_storage", copy.payloads)
