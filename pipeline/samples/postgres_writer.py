"""PostgreSQL layout (sources.md §1.2, §4.4, §6.1): partitioned `devshard_*` tables and payload_storage."""

from __future__ import annotations

from datetime import datetime, timezone

import psycopg

from pipeline.paths import sql_text

from .host_copy import HostCopy
from .spec import CALENDAR_START

TABLE_NAMES = {
    "sessions": "devshard_sessions", "diffs": "devshard_diffs", "signatures": "devshard_signatures",
    "snapshots": "devshard_snapshots", "sealed_inferences": "devshard_sealed_inferences",
    "slot_validation_obs": "devshard_slot_validation_obs",
    "inference_validation_obs": "devshard_inference_validation_obs",
    "sealed_validation_obs": "devshard_sealed_validation_obs",
    "escrow_epoch": "devshard_session_index", "escrow_cache": "devshard_escrow_cache",
}
PARTITIONED = [TABLE_NAMES[t] for t in ("sessions", "diffs", "signatures", "snapshots", "sealed_inferences",
                                        "slot_validation_obs", "inference_validation_obs",
                                        "sealed_validation_obs")] + ["devshard_validation_leases", "payload_storage"]
MIGRATIONS = ((1, "create_devshard_session_index"), (2, "add_session_index_epoch_lookup"),
              (3, "create_devshard_sessions"), (4, "create_devshard_diffs"), (5, "create_devshard_signatures"),
              (6, "create_devshard_snapshots"), (7, "create_devshard_sealed_inferences"),
              (8, "create_devshard_slot_validation_obs"), (9, "create_devshard_validation_obs"),
              (10, "create_devshard_validation_leases"), (11, "create_devshard_escrow_cache"),
              (13, "create_devshard_storage_identity"))


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
        cursor.execute(sql_text("upstream/postgres.sql"))
        cursor.execute(sql_text("upstream/postgres_payloads.sql"))
        for parent in PARTITIONED:
            for epoch in copy.epochs:
                cursor.execute(f"CREATE TABLE {parent}_epoch_{epoch} PARTITION OF {parent} "
                               f"FOR VALUES FROM ({epoch}) TO ({epoch + 1})")
        applied_at = datetime.fromtimestamp(CALENDAR_START - 30 * 86400, timezone.utc).replace(tzinfo=None)
        cursor.executemany("INSERT INTO schema_migrations (id, name, applied_at) VALUES (%s, %s, %s)",
                           [(step, name, applied_at) for step, name in MIGRATIONS])
        cursor.execute("INSERT INTO devshard_storage_identity (singleton, identity) VALUES (true, %s)",
                       (copy.lineage,))
        for table, rows in copy.tables.items():
            _copy_rows(cursor, TABLE_NAMES[table], rows)
        _copy_rows(cursor, "devshard_validation_leases", copy.validation_leases)
        _copy_rows(cursor, "payload_storage", copy.payloads)
