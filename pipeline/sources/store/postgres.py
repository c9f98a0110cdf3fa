"""A devshard PostgreSQL database (a dump restore or a standby that no daemon writes to).

Reads go through the ADBC PostgreSQL driver, which runs `COPY … TO STDOUT
(FORMAT binary)` and hands back Arrow record batches, so memory stays bounded by
the batch size. The connection opens every transaction `REPEATABLE READ, READ
ONLY` (libpq `options`), and the whole ingest runs inside the first one: one
snapshot per ingest, and the source cannot be written even by mistake.

`read_many` streams several reads at once on READ_CONNECTIONS connections. The
first transaction exports its snapshot (`pg_export_snapshot()`) and every other
connection imports it (`SET TRANSACTION SNAPSHOT`) before its first query, so
all of them see exactly the same data. A server that refuses either step gets
sequential reads on the one connection, with the same results.
"""

from __future__ import annotations

import json
import queue
import re
import threading
from collections.abc import Generator, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pyarrow as pa

from pipeline.core.paths import sql_text
from pipeline.core.sqlnames import quote_ident, quote_string
from pipeline.sources.store.accounting import POSTGRES_LEDGER_TABLES
from pipeline.sources.store.adbc import import_dbapi
from pipeline.sources.store.base import (
    APPEND_ONLY,
    ESCROW_SCOPED,
    KNOWN_NOT_INGESTED,
    KNOWN_UNREAD_COLUMNS,
    TABLES,
    EscrowRange,
    Problem,
    ReadRequest,
    SourceDescription,
    SourceError,
    TableReport,
    conform,
    describe_snapshots,
    not_read_reason,
    one_line,
    require_columns,
    split_rejected,
    stream_query,
)
from pipeline.sources.store.postgres_address import PostgresAddress
from pipeline.sources.store.postgres_markers import markers_digest, markers_query
from pipeline.sources.store.release_lines import recognise

adbc_pg = import_dbapi("adbc_driver_postgresql.dbapi")

PREFIX = "devshard_"
# Tables of other planes that may share the database (docs/sources.md, PostgreSQL layout).
OTHER_PLANES = {"accounting_": "accounting ledger", "payload_storage": "payloads", "gateway_": "gateway store"}
# Connections streaming at once in read_many: the server's COPY and the driver's binary parsing
# of one read overlap with another read and with the consumer (the driver releases the GIL).
READ_CONNECTIONS = 2
# Batches a read_many stream may hold ahead of its consumer.
READ_AHEAD_BATCHES = 2
# Rows per batch of a table read (~4 MB at the driver's hint of 256 bytes a row). The reads hold
# READ_CONNECTIONS x (READ_AHEAD_BATCHES + the one being parsed + the one consumed) batches at once,
# so the batch size sets the reads' share of the peak RSS (the choice measured: bench/BENCHMARKS.md).
BATCH_ROWS = 16384
_END = object()
# An epoch partition's name (docs/sources.md, PostgreSQL layout): <parent>_epoch_<N>.
PARTITION_NAME = re.compile(r"^(devshard_[a-z_]+?)_epoch_(\d+)$")


class _ReadCall:
    """The streams of one read_many call, filled by the store's reader threads."""

    def __init__(self, requests: Sequence[ReadRequest], batch_rows: int):
        self.requests, self.batch_rows = requests, batch_rows
        self.streams: list[queue.Queue[Any]] = [queue.Queue(READ_AHEAD_BATCHES) for _ in requests]
        self.stop = threading.Event()  # the consumer left the `with` block
        self.done = threading.Semaphore(0)  # released once per request, when its job is over

    def _offer(self, i: int, item) -> bool:
        while not self.stop.is_set():
            try:
                self.streams[i].put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def fill(self, i: int, batches: Generator[pa.RecordBatch, None, None]) -> None:
        try:
            for batch in batches:
                if not self._offer(i, batch):
                    return
            self._offer(i, _END)
        except BaseException as exc:  # handed to the consumer, raised in its thread
            self._offer(i, exc)
        finally:
            batches.close()  # an abandoned read closes its cursor before the connection is reused

    def drain(self, i: int) -> Iterator[pa.RecordBatch]:
        while (item := self.streams[i].get()) is not _END:
            if isinstance(item, BaseException):
                raise item
            yield item


class PostgresStore:
    kind = "postgres"

    def __init__(self, url: str):
        self._address = PostgresAddress(url)
        self.display = self._address.display
        self._conn = self._connect()
        self._snapshot = self._export_snapshot()  # first statement: the ingest's snapshot starts here
        self._readers: list = []  # further connections in the same snapshot, opened by read_many
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()  # (read call, request index) for the reader threads
        self._threads: list[threading.Thread] = []
        self._rejected: list[Problem] = []  # rows set aside by the reads, taken by the ingest
        self._tables = self._catalog()
        if not any(t.startswith(PREFIX) for t in self._tables):
            self.close()
            raise SourceError(f"{self.display}: no devshard_* tables (not a devshard session store, or empty)")
        self.lineage_id = self._lineage()
        self.source_id = self._address.source_id(self.lineage_id)

    def _connect(self):
        return self._address.connect(lambda: adbc_pg.connect(self._address.url))

    def _export_snapshot(self) -> str | None:
        try:
            return self._query("SELECT pg_export_snapshot() AS id").column("id")[0].as_py()
        except SourceError:  # e.g. a pooler in statement mode: read sequentially on this connection
            self._conn.rollback()  # the failed statement aborted the transaction; nothing was read yet
            return None

    def _reader_connections(self) -> list:
        """This connection plus up to READ_CONNECTIONS - 1 more, all in this ingest's snapshot."""
        while self._snapshot is not None and len(self._readers) < READ_CONNECTIONS - 1:
            conn = None
            try:
                conn = adbc_pg.connect(self._address.url)  # no wait for a slot: without one, read sequentially
                cur = conn.cursor()
                try:  # must be the transaction's first statement (REPEATABLE READ READ ONLY by options)
                    cur.execute(f"SET TRANSACTION SNAPSHOT {quote_string(self._snapshot)}")
                finally:
                    cur.close()
            except Exception:  # connection limit, or a server that cannot import: stay sequential
                if conn is not None:
                    conn.close()
                self._snapshot = None
                break
            self._readers.append(conn)
        conns = [self._conn, *self._readers]
        if len(conns) > 1:
            while len(self._threads) < len(conns):
                thread = threading.Thread(target=self._serve, args=(conns[len(self._threads)],), daemon=True)
                thread.start()
                self._threads.append(thread)
        return conns

    def _query(self, sql: str, params: tuple = (), conn=None) -> pa.Table:
        cur = (conn or self._conn).cursor()
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
        ids = self._query(sql_text("sources/postgres/lineage.sql")).column("id").to_pylist()
        return ids[0] if ids else None

    def take_rejected(self) -> list[Problem]:
        """The rows the reads set aside since the last call (table, key, reason), each with its reason."""
        taken, self._rejected = self._rejected, []
        return taken

    def tables_not_read(self) -> list[tuple[str, str, str]]:
        """(table, "database", why) of every table of the database that no read of the ingest takes (the ledger and
        payload planes read theirs; detached partitions are counted row by row)."""
        detached = {physical for _, physical in self.detached_partitions()}
        found = []
        for name in sorted(self._tables):
            if name in detached or name in POSTGRES_LEDGER_TABLES or name == "payload_storage":
                continue
            if name.startswith("accounting_"):
                found.append((name, "database", "a table of the accounting ledger that no evidence reads"))
                continue
            if name.startswith(PREFIX):
                if name[len(PREFIX) :] not in TABLES:
                    found.append((name, "database", not_read_reason(name[len(PREFIX) :])))
            elif name.startswith("gateway_"):
                found.append((name, "database", "the gateway's own store: no evidence reads it"))
            else:
                found.append((name, "database", not_read_reason(name)))
        return found

    def detached_partitions(self) -> list[tuple[str, str]]:
        """(logical table, physical table) of the plain tables named like an epoch partition of a
        parent we read: a partition detached from its parent, whose rows the parent no longer shows."""
        found = []
        for name in self._tables:
            m = PARTITION_NAME.match(name)
            if m and m.group(1) in self._tables and m.group(1)[len(PREFIX) :] in TABLES:
                found.append((m.group(1)[len(PREFIX) :], name))
        return sorted(found)

    def detached_rows(self) -> list[Problem]:
        """One problem per row of every detached partition (never read as data: the copy's parent
        does not hold them, and choosing to would be a guess), named by its key."""
        problems = []
        for logical, physical in self.detached_partitions():
            cols = self._tables[physical]
            key = (
                " || '/' || ".join(f"coalesce(t.\"{c}\"::text, 'NULL')" for c in TABLES[logical].key if c in cols)
                or "'?'"
            )
            epoch = "coalesce(t.epoch_id::text, '?')" if "epoch_id" in cols else "'?'"
            sql = f"SELECT {epoch} || ': ' || {key} AS k FROM \"{physical}\" t"
            for batch in self._batches(self._conn, sql, (), BATCH_ROWS, f"reading {physical}"):
                problems += [
                    (logical, f"epoch {k}", f"{physical} is a partition detached from {PREFIX}{logical}: not read")
                    for k in batch.column("k").to_pylist()
                ]
        return problems

    def read_orphans(self, table: str, epoch_id: int, escrows: list[str]) -> list[str]:
        """Keys of the rows of an escrow-scoped table of one epoch whose escrow is none of `escrows` (the
        epoch's sessions the ingest uses): rows no session claims, read by no cursor, so named here."""
        cols = self.columns(table, epoch_id)
        if cols is None or "escrow_id" not in cols:
            return []
        key = " || '/' || ".join(f"coalesce(t.\"{c}\"::text, 'NULL')" for c in TABLES[table].key if c in cols)
        sql = (
            f'SELECT {key} AS k FROM "{PREFIX}{table}" t WHERE t.epoch_id = {int(epoch_id)} AND (t.escrow_id IS NULL '
            f"OR t.escrow_id NOT IN (SELECT jsonb_array_elements_text({quote_string(json.dumps(escrows))}::jsonb)))"
        )
        batches = self._batches(self._conn, sql, (), BATCH_ROWS, f"checking {PREFIX}{table}")
        return [k for b in batches for k in b.column("k").to_pylist()]

    def change_markers(self) -> str | None:
        """The digest of the copy's change markers (pipeline/sources/store/postgres_markers.py) in this ingest's
        snapshot, read on a second connection that imported it (its text formats are pinned for the
        markers, the main connection's are left alone); None when they cannot tell a change, or when
        no second connection shares the snapshot: markers from another moment could stand for data
        this ingest did not read. Call it between reads (its connection also serves `read_many`)."""
        query = markers_query(self._tables)
        conns = self._reader_connections() if query is not None else []
        if query is None or len(conns) < 2:
            return None
        self._query(sql_text("sources/postgres/marker_settings.sql"), conn=conns[1])
        return markers_digest((r["part"], r["marker"]) for r in self._query(query, conn=conns[1]).to_pylist())

    def table_columns(self, table: str) -> list[str] | None:
        """Columns of any table of the database (parents and plain tables), None when absent."""
        return self._tables.get(table)

    def query_batches(
        self, sql: str, params: tuple = (), batch_rows: int = 65536, what: str = "query"
    ) -> Iterator[pa.RecordBatch]:
        """Arrow batches of any read query, inside this ingest's snapshot (for other planes too)."""
        return self._batches(self._conn, sql, params, batch_rows, what)

    def _batches(self, conn, sql: str, params: tuple, batch_rows: int, what: str) -> Iterator[pa.RecordBatch]:
        cur = conn.cursor()
        cur.adbc_statement.set_options(**{"adbc.postgresql.batch_size_hint_bytes": str(batch_rows * 256)})
        yield from stream_query(cur, sql, params, self.display, what)

    def epochs(self) -> list[int]:
        return self._query(sql_text("sources/postgres/epochs.sql")).column("epoch_id").to_pylist()

    def columns(self, table: str, epoch_id: int | None) -> list[str] | None:
        return self._tables.get(PREFIX + table)

    def read(
        self,
        table: str,
        epoch_id: int | None,
        cursors: dict[str, int] | None = None,
        batch_rows: int = BATCH_ROWS,
        *,
        escrows: EscrowRange | None = None,
    ) -> Iterator[pa.RecordBatch]:
        return self._read_on(self._conn, table, epoch_id, cursors, batch_rows, escrows)

    def escrow_weights(self) -> list[tuple[str, int]]:
        """Every escrow of the sessions, in the database's order of escrow ids (the order of `escrows=`
        ranges), with its diff count as the sessions state it (latest nonce past the import): what the
        network lake's stage 1 cuts a copy by."""
        present = self._tables.get(f"{PREFIX}sessions", [])
        if "escrow_id" not in present:
            return []
        nonce = [f't."{c}"::bigint' for c in ("latest_nonce", "imported_nonce") if c in present]
        diffs = f"greatest({' - '.join(f'coalesce({n}, 0)' for n in nonce)}, 0)" if nonce else "0"
        sql = (
            f'SELECT t.escrow_id AS escrow_id, sum({diffs} + 1)::bigint AS n FROM "{PREFIX}sessions" t '
            "WHERE t.escrow_id IS NOT NULL GROUP BY t.escrow_id ORDER BY t.escrow_id"
        )
        rows = self._query(sql)
        return list(zip(rows.column("escrow_id").to_pylist(), rows.column("n").to_pylist(), strict=True))

    def _read_on(
        self,
        conn,
        table: str,
        epoch_id: int | None,
        cursors: dict[str, int] | None,
        batch_rows: int,
        escrows: EscrowRange | None = None,
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
            # a nonce that is no count is set aside with its reason, never skipped
            past = " AND (t.nonce > c.value::bigint OR t.nonce IS NULL OR t.nonce <= 0)" if table in APPEND_ONLY else ""
            sql += f" JOIN jsonb_each_text({quote_string(json.dumps(cursors))}::jsonb) c ON c.key = t.escrow_id{past}"
        where = []
        if spec.per_epoch and epoch_id is not None:
            where.append(f"t.epoch_id = {int(epoch_id)}")
        if escrows is not None:
            # in the column's own collation, the order `escrow_weights` gives (and its index serves);
            # a NULL id lies below every bound
            low, below = escrows
            if low is not None:
                where.append(f"t.escrow_id >= {quote_string(low)}")
            if below is not None:  # the first range also holds the NULL ids
                below_sql = f"t.escrow_id < {quote_string(below)}"
                where.append(below_sql if low is not None else f"({below_sql} OR t.escrow_id IS NULL)")
        if where:
            sql += " WHERE " + " AND ".join(where)
        for batch in self._batches(conn, sql, (), batch_rows, f"reading {PREFIX}{table}"):
            batch, rejected = split_rejected(batch, spec, f"{PREFIX}{table}")
            self._rejected += rejected
            if batch.num_rows:
                yield conform(batch, spec, epoch_id if spec.per_epoch else None)

    @contextmanager
    def read_many(
        self, requests: Sequence[ReadRequest], batch_rows: int = BATCH_ROWS
    ) -> Iterator[list[Iterator[pa.RecordBatch]]]:
        """One batch stream per request, to be consumed in request order; up to READ_CONNECTIONS
        requests are read at once (each stream holds at most READ_AHEAD_BATCHES ahead)."""
        if len(requests) < 2 or len(self._reader_connections()) < 2:
            yield [self.read(t, e, c, batch_rows) for t, e, c in requests]
            return
        call = _ReadCall(requests, batch_rows)
        # The jobs queue is FIFO, so the earliest unfinished stream always has a reader and an
        # in-order consumer never waits on a stream nobody reads.
        for i in range(len(requests)):
            self._jobs.put((call, i))
        try:
            yield [call.drain(i) for i in range(len(requests))]
        finally:
            call.stop.set()
            for _ in requests:  # every job of this call finished or skipped: the connections are free
                call.done.acquire()

    def _serve(self, conn) -> None:
        """A reader thread: one per connection, alive as long as the store. Threads are kept
        rather than started per read_many because glibc gives each new thread a fresh malloc arena
        (up to 8 per core) that keeps its freed pages: with threads per chunk the ingest's RSS grows
        with the number of chunks (bench/BENCHMARKS.md, ingest memory)."""
        while (job := self._jobs.get()) is not None:
            call, i = job
            try:
                if not call.stop.is_set():
                    table, epoch_id, cursors = call.requests[i]
                    call.fill(i, self._read_on(conn, table, epoch_id, cursors, call.batch_rows))
            finally:
                call.done.release()

    def describe(self) -> SourceDescription:
        counts = self._query(sql_text("sources/postgres/partition_counts.sql")).to_pylist()
        reports: dict[str, TableReport] = {}
        for r in counts:
            cols = self._tables.get(r["parent"], [])
            rep = reports.setdefault(r["parent"], TableReport(r["parent"], {}, cols))
            rep.rows_by_epoch[r["epoch_id"]] = r["n"]
        unrecognised = []
        planes = ["session storage"]
        detached = {physical: logical for logical, physical in self.detached_partitions()}
        for name, cols in self._tables.items():
            if name in detached:
                n = self._query(f'SELECT count(*) AS n FROM "{name}"').column("n")[0].as_py()
                unrecognised.append(
                    f"table {name}: a partition detached from {PREFIX}{detached[name]}, {n:,} rows "
                    "(the ingest quarantines them)"
                )
            elif name.startswith(PREFIX):
                logical = name[len(PREFIX) :]
                rep = reports.setdefault(name, TableReport(name, {}, cols))
                if not rep.rows_by_epoch:
                    rep.rows_by_epoch[None] = (
                        self._query(f"SELECT count(*) AS n FROM {quote_ident(name)}").column("n")[0].as_py()
                    )
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
        version, steps = None, []
        if "schema_migrations" in self._tables:
            steps = self._query("SELECT id::bigint AS id, name FROM schema_migrations ORDER BY id").to_pylist()
            version = max((r["id"] for r in steps), default=None)
        line = recognise("postgres", [(r["id"], r["name"]) for r in steps], self._tables).describe()
        imported = sum(sum(1 for n in b.column("imported_nonce").to_pylist() if n) for b in self.read("sessions", None))
        return SourceDescription(
            kind=self.kind,
            display=self.display,
            source_id=self.source_id,
            lineage_id=self.lineage_id,
            epochs=self.epochs(),
            schema_versions={"database": version},
            tables=list(reports.values()),
            unrecognised=unrecognised,
            planes=planes,
            release_lines={"database": line},
            snapshots=describe_snapshots(self.read("snapshots", None), imported),
        )

    def close(self) -> None:
        for _ in self._threads:
            self._jobs.put(None)
        for thread in self._threads:
            thread.join()
        self._threads.clear()
        for conn in [*self._readers, self._conn]:  # the exporting transaction ends last
            try:
                conn.rollback()  # end the read-only snapshot; nothing was written
            except Exception:
                pass
            conn.close()
