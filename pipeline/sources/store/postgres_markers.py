"""Change markers of a PostgreSQL copy: a few rows that move whenever anything a re-ingest could take
from the copy moves, read without reading the copy.

Of an unchanged copy, an ingest reads every escrow's session and escrow-cache row, the ledger's
change markers and the payload keys (pipeline/ingest/store.py); everything else it reads only for escrows
whose session moved. So the markers are: the catalog (tables and columns), a row-hash sum of the
storage identity, the sessions and the escrow cache, one of the payload keys, and the ledger's own
markers (sources/postgres/accounting_markers.sql). Equal markers, in a
warehouse where nothing changed since (pipeline/ingest/unchanged.py), mean that an ingest would write nothing.

They are read in two ways: by the store at the end of each ingest, inside the ingest's snapshot
(`PostgresStore.change_markers`), and before an ingest by `read_markers`, through the ADBC driver's
C API with the results scanned by DuckDB, so that telling an unchanged copy loads neither pyarrow nor
Polars (bench/BENCHMARKS.md, the no-op re-ingest). Both run the same SQL.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from pipeline.core.paths import sql_text
from pipeline.sources.store.postgres_address import PostgresAddress

# table -> the text of one of its rows that its marker hashes
MARKED_TABLES = {
    "devshard_storage_identity": "t::text",
    "devshard_sessions": "t::text",
    "devshard_escrow_cache": "t::text",
    "payload_storage": "t.escrow_id || '/' || t.inference_id::text",  # the keys: stored payloads never change
}
LEDGER_STATE = "accounting_escrow_state"  # a copy has a ledger when it has this table …
LEDGER_MARKED_BY = ("accounting_meta", "accounting_writers")  # … and these tell its changes
# The legacy blob table is a leftover (docs/sources.md, PostgreSQL row layout): a ledger created in the row
# layout has none, and is still a full ledger; where it exists its row count is a marker too.
LEGACY_LEDGER = "accounting_escrows"


def accounting_markers_sql(tables: Collection[str]) -> str:
    """The ledger's markers query (rows: marker) for a copy with the given tables."""
    legacy = sql_text("sources/postgres/accounting_markers_legacy.sql") if LEGACY_LEDGER in tables else ""
    return sql_text("sources/postgres/accounting_markers.sql").format(legacy=legacy)


def markers_query(tables: Collection[str]) -> str | None:
    """The query of a copy's markers (rows: part, marker) for the tables it has; None for a copy with
    a partial ledger, whose changes no marker tells (an ingest reads such a ledger in full)."""
    parts = [sql_text("sources/postgres/catalog_marker.sql").format(catalog=sql_text("sources/postgres/catalog.sql"))]
    template = sql_text("sources/postgres/table_marker.sql")
    parts += [template.format(table=table, row=row) for table, row in MARKED_TABLES.items() if table in tables]
    if LEDGER_STATE in tables:
        if any(t not in tables for t in LEDGER_MARKED_BY):
            return None
        ledger = accounting_markers_sql(tables)
        parts.append(sql_text("sources/postgres/ledger_marker.sql").format(ledger=ledger))
    return "\nUNION ALL\n".join(f"({p}\n)" for p in parts)


def markers_digest(rows: Iterable[tuple[str, str | None]]) -> str:
    """The markers as one "sha256:…" digest (order-independent)."""
    digest = hashlib.sha256()
    for part, marker in sorted(rows, key=lambda r: r[0]):
        digest.update(f"{part}\x1f{marker or ''}\n".encode())
    return "sha256:" + digest.hexdigest()


@dataclass(frozen=True)
class CopyMarkers:
    """What `read_markers` found: the copy's source id and display name, and its markers' digest."""

    source_id: str
    display: str
    digest: str


def read_markers(url: str, duckdb_connection: Callable[[], Any]) -> CopyMarkers | None:
    """The change markers of the copy at `url`, in one read-only snapshot, the results scanned by the
    DuckDB connection that `duckdb_connection()` gives (asked for once the copy has answered); None
    when the copy's markers cannot tell (see `markers_query`) or cannot be read. A copy that cannot be
    reached is a SourceError, as for the store itself."""
    import adbc_driver_manager
    import adbc_driver_postgresql

    address = PostgresAddress(url)

    def open_connection() -> tuple:
        database = adbc_driver_postgresql.connect(address.url)
        return database, adbc_driver_manager.AdbcConnection(database)

    database, connection = address.connect(open_connection)
    try:
        # One transaction (REPEATABLE READ by the URL's options): the catalog and the markers come
        # from one snapshot.
        connection.set_autocommit(False)

        def rows(sql: str) -> list[tuple]:
            statement = adbc_driver_manager.AdbcStatement(connection)
            try:
                statement.set_sql_query(sql)
                stream, _ = statement.execute_query()
                return duckdb_connection().from_arrow(stream).fetchall()
            finally:
                statement.close()

        try:
            tables = {name for name, _ in rows(sql_text("sources/postgres/catalog.sql"))}
            if not any(t.startswith("devshard_") for t in tables):
                return None  # the store says what is wrong with such a copy
            query = markers_query(tables)
            if query is None:
                return None
            rows(sql_text("sources/postgres/marker_settings.sql"))
            found = rows(query)
            lineage = rows(sql_text("sources/postgres/lineage.sql")) if "devshard_storage_identity" in tables else []
        except adbc_driver_manager.Error:
            return (
                None  # e.g. a role that may not read a marked table: the full ingest reads what it can, or says why not
            )
        return CopyMarkers(
            address.source_id(lineage[0][0] if lineage else None), address.display, markers_digest(found)
        )
    finally:
        try:
            connection.rollback()
        except adbc_driver_manager.Error:
            pass
        connection.close()
        database.close()
