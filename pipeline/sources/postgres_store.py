"""A devshard PostgreSQL database (a dump restore or a standby that no daemon writes to).

Reads go through the ADBC PostgreSQL driver, which runs `COPY … TO STDOUT
(FORMAT binary)` and hands back Arrow record batches, so memory stays bounded by
the batch size. The connection opens every transaction `REPEATABLE READ, READ
ONLY` (libpq `options`), and the whole ingest runs inside the first one: one
snapshot per ingest, and the source cannot be written even by mistake.
"""

from __future__ import annotations

import json
from typing import Iterator
from urllib.parse import quote

import adbc_driver_postgresql.dbapi as adbc_pg
import pyarrow as pa
from sqlalchemy.engine import make_url

from pipeline.paths import sql_text
from pipeline.sources.base import (
    ESCROW_SCOPED,
    KNOWN_NOT_INGESTED,
    KNOWN_UNREAD_COLUMNS,
    TABLES,
    SourceDescription,
    SourceError,
    TableReport,
    conform,
    one_line,
    require_columns,
)

SNAPSHOT_OPTIONS = "-c default_transaction_isolation=repeatable\\ read -c default_transaction_read_only=on"
PREFIX = "devshard_"
# Tables of other planes that may share the database (sources.md §1.5, §5, §6).
OTHER_PLANES = {"accounting_": "accounting ledger", "payload_storage": "payloads", "gateway_": "gateway store"}


def redact(url: str) -> str:
    """The URL with its password replaced, for every message and every stored row."""
    if url in ("postgres", "postgresql://"):
        return "postgres (libpq environment)"
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "postgresql://(unparseable URL)"


def _with_snapshot_options(url: str) -> str:
    if url == "postgres":
        url = "postgresql://"
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options={quote(SNAPSHOT_OPTIONS)}"


def _literal(text: str) -> str:
    """A standard-conforming SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def _password(url: str) -> str | None:
    try:
        return make_url(url).password
    except Exception:
        return None


class PostgresStore:
    kind = "postgres"

    def __init__(self, url: str):
        self.display = redact(url)
        secret = _password(url) if url != "postgres" else None
        try:
            self._conn = adbc_pg.connect(_with_snapshot_options(url))
        except Exception as exc:
            message = one_line(exc)
            if secret:
                message = message.replace(secret, "***")
            raise SourceError(f"{self.display}: cannot connect ({message})") from None
        self._tables = self._catalog()
        if not any(t.startswith(PREFIX) for t in self._tables):
            self.close()
            raise SourceError(f"{self.display}: no devshard_* tables (not a devshard session store, or empty)")
        self.lineage_id = self._lineage()
        self.source_id = f"lineage:{self.lineage_id}" if self.lineage_id else f"postgres:{self.display}"

    def _query(self, sql: str, params: tuple = ()) -> pa.Table:
        cur = self._conn.cursor()
        try:
            cur.execute(sql, params)
            return cur.fetch_arrow_table()
        except Exception as exc:
            raise SourceError(f"{self.display}: query failed ({one_line(exc)})") from None
        finally:
            cur.close()

    def _catalog(self) -> dict[str, list[str]]:
        """Parent and plain tables of the public schema (partition children excluded) with their columns."""
        rows = self._query(sql_text("sources/postgres/catalog.sql")).to_pylist()
        tables: dict[str, list[str]] = {}
        for r in rows:
            tables.setdefault(r["table_name"], []).append(r["column_name"])
        return tables

    def _lineage(self) -> str | None:
        if "devshard_storage_identity" not in self._tables:
            return None
        ids = self._query("SELECT identity::text AS id FROM devshard_storage_identity").column("id").to_pylist()
        return ids[0] if ids else None

    def table_columns(self, table: str) -> list[str] | None:
        """Columns of any table of the database (parents and plain tables), None when absent."""
        return self._tables.get(table)

    def query_batches(
        self, sql: str, params: tuple = (), batch_rows: int = 65536, what: str = "query"
    ) -> Iterator[pa.RecordBatch]:
        """Arrow batches of any read query, inside this ingest's snapshot (for other planes too)."""
        cur = self._conn.cursor()
        cur.adbc_statement.set_options(**{"adbc.postgresql.batch_size_hint_bytes": str(batch_rows * 256)})
        try:
            cur.execute(sql, params)
            yield from cur.fetch_record_batch()
        except Exception as exc:
            raise SourceError(f"{self.display}: {what} failed ({one_line(exc)})") from None
        finally:
            cur.close()

    def epochs(self) -> list[int]:
        return self._query(sql_text("sources/postgres/epochs.sql")).column("epoch_id").to_pylist()

    def columns(self, table: str, epoch_id: int | None) -> list[str] | None:
        return self._tables.get(PREFIX + table)

    def read(
        self, table: str, epoch_id: int | None, cursors: dict[str, int] | None = None, batch_rows: int = 65536
    ) -> Iterator[pa.RecordBatch]:
        spec = TABLES[table]
        present = self.columns(table, epoch_id)
        if present is None:
            return
        require_columns(spec, present, f"{self.display}: table {PREFIX}{table}")
        cols = ", ".join(f't."{f.name}"' for f in spec.schema if f.name in present)
        # Values are written into the SQL as literals on purpose: with bind parameters the ADBC
        # driver runs a prepared statement instead of COPY and returns the whole result as one
        # batch (measured: 347 MB for one epoch of diffs), which breaks bounded memory.
        sql = f'SELECT {cols} FROM "{PREFIX}{table}" t'
        if cursors is not None and table in ESCROW_SCOPED:
            past = " AND t.nonce > c.value::bigint" if table == "diffs" else ""
            sql += f" JOIN jsonb_each_text({_literal(json.dumps(cursors))}::jsonb) c ON c.key = t.escrow_id{past}"
        if spec.per_epoch and epoch_id is not None:
            sql += f" WHERE t.epoch_id = {int(epoch_id)}"
        for batch in self.query_batches(sql, batch_rows=batch_rows, what=f"reading {PREFIX}{table}"):
            if batch.num_rows:
                yield conform(batch, spec, epoch_id if spec.per_epoch else None)

    def describe(self) -> SourceDescription:
        counts = self._query(sql_text("sources/postgres/partition_counts.sql")).to_pylist()
        reports: dict[str, TableReport] = {}
        for r in counts:
            cols = self._tables.get(r["parent"], [])
            rep = reports.setdefault(r["parent"], TableReport(r["parent"], {}, cols))
            rep.rows_by_epoch[r["epoch_id"]] = r["n"]
        unrecognised = []
        planes = ["session storage"]
        for name, cols in self._tables.items():
            if name.startswith(PREFIX):
                logical = name[len(PREFIX):]
                rep = reports.setdefault(name, TableReport(name, {}, cols))
                if not rep.rows_by_epoch:
                    rep.rows_by_epoch[None] = self._query(f'SELECT count(*) AS n FROM "{name}"').column("n")[0].as_py()
                if logical in TABLES:
                    canon = TABLES[logical].schema.names
                    rep.missing_columns = [c for c in canon if c not in cols]
                    rep.extra_columns = [c for c in cols if c not in canon and c not in KNOWN_UNREAD_COLUMNS]
                elif logical not in KNOWN_NOT_INGESTED:
                    unrecognised.append(f"table {name}")
            elif name == "schema_migrations":
                continue
            else:
                plane = next((p for prefix, p in OTHER_PLANES.items() if name.startswith(prefix)), None)
                if plane and plane not in planes:
                    planes.append(plane)
                elif plane is None:
                    unrecognised.append(f"table {name}")
        version = None
        if "schema_migrations" in self._tables:
            version = self._query("SELECT max(id)::bigint AS v FROM schema_migrations").column("v")[0].as_py()
        return SourceDescription(
            kind=self.kind, display=self.display, source_id=self.source_id, lineage_id=self.lineage_id,
            epochs=self.epochs(), schema_versions={"database": version}, tables=list(reports.values()),
            unrecognised=unrecognised, planes=planes,
        )

    def close(self) -> None:
        try:
            self._conn.rollback()  # end the read-only snapshot; nothing was written
        except Exception:
            pass
        self._conn.close()
