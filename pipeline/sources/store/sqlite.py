"""A devshard SQLite store directory: `_meta.db` plus one `epoch_<N>.db` per epoch.

The epoch exists only in the file name. Files are opened read-only through the
ADBC SQLite driver (Arrow batches, no Python rows). A file opened with plain
`mode=ro` in WAL mode would still create `-wal`/`-shm` files next to it, so:
- a file without a `-wal` beside it is opened `immutable=1` (nothing is written,
  and there is no WAL content to miss);
- a file with a `-wal` (a copy taken together with its WAL, one of the safe ways to copy a live file) is
  first copied with its `-wal`/`-shm` into a private temporary directory, and
  the copy is read, so the source files stay byte-identical.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.core.sqlnames import quote_ident
from pipeline.sources.store.adbc import import_dbapi
from pipeline.sources.store.base import (
    APPEND_ONLY,
    ESCROW_SCOPED,
    KNOWN_NOT_INGESTED,
    KNOWN_UNREAD_COLUMNS,
    TABLES,
    ReadRequest,
    SourceDescription,
    SourceError,
    TableReport,
    conform,
    describe_snapshots,
    one_line,
    require_columns,
    stream_query,
)
from pipeline.sources.store.release_lines import recognise

adbc_sqlite = import_dbapi("adbc_driver_sqlite.dbapi")

EPOCH_FILE = re.compile(r"^epoch_(\d+)\.db$")
MIGRATED_FILE = re.compile(r"^(.*\.db)\.migrated\.[^/]+$")
# v0.2.12 and earlier kept one file (sessions, diffs, signatures) before the per-epoch layout (#1145,
# 2026-05-06; docs/sources.md, what the pipeline must handle). Its rows carry no epoch, which every
# warehouse key needs, so it is refused by name rather than read with a guessed epoch.
LEGACY_STORE_FILE = "devshard.db"
LEGACY_STORE_REASON = (
    "a v0.2.12-era single-file devshard store (before the per-epoch layout, #1145), not supported: "
    "its sessions and diffs carry no epoch"
)
# Witness literals per Arrow type: ADBC SQLite infers a column's type from the
# first rows, so an all-NULL start would type a BLOB column as int64 and fail
# later. One typed witness row is read first and dropped (see `_select`).
WITNESS = {pa.int64(): "0", pa.string(): "''", pa.binary(): "X''", pa.bool_(): "0"}
# Physical names of the logical tables in the SQLite layout.
PHYSICAL = {"escrow_cache": ("_meta", "escrow_cache")}


def is_sqlite_store(path: Path) -> bool:
    return path.is_dir() and ((path / "_meta.db").exists() or any(EPOCH_FILE.match(p.name) for p in path.iterdir()))


def sqlite_uri(file: Path, query: str) -> str:
    """A SQLite URI naming exactly `file`: `%`, `#`, `?` and spaces in a path are percent-encoded, so a
    directory named ``s%41`` is not read as ``sA`` and a ``#`` or ``?`` cannot turn into URI syntax."""
    return f"{file.resolve().as_uri()}?{query}"


class SqliteStore:
    kind = "sqlite"

    def __init__(self, path: Path):
        path = Path(path)
        if not path.exists():
            raise SourceError(f"{path}: no such file or directory")
        if not is_sqlite_store(path):
            legacy = path if path.name == LEGACY_STORE_FILE else path / LEGACY_STORE_FILE
            if legacy.is_file():
                raise SourceError(f"{legacy}: {LEGACY_STORE_REASON}")
            raise SourceError(f"{path}: not a devshard SQLite store (no _meta.db or epoch_<N>.db inside)")
        self.path = path.resolve()
        self.display = str(self.path)
        # The store's name, not where it lies: the same copy gets the same source id on any machine
        # (each run's input digest tells copies apart).
        self.source_id = f"sqlite:{self.path.name}"
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._conns: dict[str, Any] = {}  # ADBC connections by file
        self._epoch_files = {int(m.group(1)): p for p in sorted(self.path.iterdir()) if (m := EPOCH_FILE.match(p.name))}

    # -- files -----------------------------------------------------------------
    def _connect(self, file: Path):
        key = str(file)
        if key in self._conns:
            return self._conns[key]
        if Path(f"{file}-wal").exists() or Path(f"{file}-journal").exists():
            if self._tmp is None:
                self._tmp = tempfile.TemporaryDirectory(prefix="gonka-evidence-sqlite-")
            private = Path(self._tmp.name) / file.name
            for suffix in ("", "-wal", "-shm", "-journal"):
                if Path(f"{file}{suffix}").exists():
                    shutil.copy2(f"{file}{suffix}", f"{private}{suffix}")
            uri = sqlite_uri(private, "mode=rw")
        else:
            uri = sqlite_uri(file, "mode=ro&immutable=1")
        try:
            conn = adbc_sqlite.connect(uri)
            cur = conn.cursor()
            cur.execute("SELECT count(*) FROM sqlite_master")
            cur.fetchall()
            cur.close()
        except Exception as exc:  # the driver's error names the file; keep it to one line
            raise SourceError(f"{file}: cannot be read as SQLite ({one_line(exc)})") from None
        self._conns[key] = conn
        return conn

    def _query(self, file: Path, sql: str, params: tuple = ()) -> pa.Table:
        cur = self._connect(file).cursor()
        try:
            cur.execute(sql, params)
            return cur.fetch_arrow_table()
        finally:
            cur.close()

    def _physical_columns(self, file: Path, table: str) -> list[str] | None:
        rows = self._query(file, f"SELECT name FROM pragma_table_info('{table}')").column("name").to_pylist()
        return rows or None

    def query_file_batches(
        self, file: Path, sql: str, params: tuple = (), batch_rows: int = 65536, what: str = "query"
    ) -> Iterator[pa.RecordBatch]:
        """Arrow batches of a read query on one SQLite file of the store (an epoch file, or e.g.
        accounting.db), opened with the read-only rules above. Mind ADBC's type inference from
        the first rows (see `_select`)."""
        cur = self._connect(Path(file)).cursor()
        cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(batch_rows)})
        yield from stream_query(cur, sql, params, Path(file).name, what)

    # -- SessionStore ----------------------------------------------------------
    def epochs(self) -> list[int]:
        return sorted(self._epoch_files)

    def _locate(self, table: str, epoch_id: int | None) -> tuple[Path, str] | None:
        if table in PHYSICAL:
            where, name = PHYSICAL[table]
            file = self.path / f"{where}.db"
            return (file, name) if file.exists() else None
        if epoch_id not in self._epoch_files:
            return None
        return self._epoch_files[epoch_id], table

    def columns(self, table: str, epoch_id: int | None) -> list[str] | None:
        located = self._locate(table, epoch_id)
        return None if located is None else self._physical_columns(*located)

    def read(
        self, table: str, epoch_id: int | None, cursors: dict[str, int] | None = None, batch_rows: int = 65536
    ) -> Iterator[pa.RecordBatch]:
        spec = TABLES[table]
        located = self._locate(table, epoch_id)
        if located is None:
            return
        file, physical = located
        present = self._physical_columns(file, physical)
        if present is None:
            return
        require_columns(spec, present, f"{file.name}: table {physical}")
        sql, params = _select(spec, physical, present, cursors if table in ESCROW_SCOPED else None)
        for batch in self.query_file_batches(file, sql, params, batch_rows, what=f"reading {physical}"):
            batch = batch.filter(pc.equal(batch.column("__witness"), 0)).drop_columns(["__witness"])
            if batch.num_rows:
                yield conform(batch, spec, epoch_id if spec.per_epoch else None)

    @contextmanager
    def read_many(
        self, requests: Sequence[ReadRequest], batch_rows: int = 65536
    ) -> Iterator[list[Iterator[pa.RecordBatch]]]:
        """Sequential: each epoch file is its own immutable snapshot, nothing to share."""
        yield [self.read(t, e, c, batch_rows) for t, e, c in requests]

    def schema_version(self, file: Path) -> int | None:
        if self._physical_columns(file, "schema_migrations") is None:
            return None
        return self._query(file, "SELECT max(id) AS v FROM schema_migrations").column("v")[0].as_py()

    def release_line(self, file: Path) -> str:
        """The release line of one file's migration list (`doctor`)."""
        steps = []
        if self._physical_columns(file, "schema_migrations") is not None:
            steps = self._query(file, "SELECT id, name FROM schema_migrations ORDER BY id").to_pylist()
        columns = {t: self._physical_columns(file, t) or [] for t in ("sessions", "sealed_inferences")}
        layout = "sqlite_meta" if file.name == "_meta.db" else "sqlite_epoch"
        return recognise(layout, [(r["id"], r["name"]) for r in steps], columns).describe()

    def describe(self) -> SourceDescription:
        files = [self.path / "_meta.db"] if (self.path / "_meta.db").exists() else []
        files += list(self._epoch_files.values())
        reports: dict[str, TableReport] = {}
        unrecognised: list[str] = []
        versions: dict[str, int | None] = {}
        lines: dict[str, str] = {}
        for file in files:
            versions[file.name] = self.schema_version(file)
            lines[file.name] = self.release_line(file)
            epoch = next((e for e, f in self._epoch_files.items() if f == file), None)
            names = self._query(file, "SELECT name FROM sqlite_master WHERE type = 'table'").column("name").to_pylist()
            for name in names:
                if name.startswith("sqlite_"):
                    continue
                cols = self._physical_columns(file, name) or []
                count = self._query(file, f"SELECT count(*) AS n FROM {quote_ident(name)}").column("n")[0].as_py()
                logical = next((t for t, (_, phys) in PHYSICAL.items() if phys == name), name)
                rep = reports.setdefault(name, TableReport(name, {}, cols))
                rep.rows_by_epoch[epoch] = count
                if logical in TABLES:
                    canon = TABLES[logical].schema.names
                    where = f"{file.name}: " if epoch is not None else ""
                    missing = [c for c in canon if c not in cols and c != "epoch_id"]
                    extra = [c for c in cols if c not in canon and c not in KNOWN_UNREAD_COLUMNS]
                    rep.missing_columns += [f"{where}{', '.join(missing)}"] if missing else []
                    rep.extra_columns += [f"{where}{', '.join(extra)}"] if extra else []
                elif logical not in KNOWN_NOT_INGESTED:
                    unrecognised.append(f"{file.name}: table {name}")
        for p in sorted(self.path.iterdir()):
            if p.name in ("_meta.db", "accounting.db", "gateway.db", "payloads") or EPOCH_FILE.match(p.name):
                continue
            if p.name.endswith(("-wal", "-shm", "-journal")):
                continue
            if MIGRATED_FILE.match(p.name):
                unrecognised.append(f"{p.name}: migrated to PostgreSQL (ignored)")
            elif p.name == LEGACY_STORE_FILE:
                unrecognised.append(f"{p.name}: not read, {LEGACY_STORE_REASON}")
            else:
                unrecognised.append(f"{p.name}: not part of a devshard store")
        planes = ["session storage"]
        accounting = self.path / "accounting.db"
        if accounting.exists():
            try:  # a ledger that cannot be read is said here, as the ingest would stop on it
                self._connect(accounting)
                planes.append("accounting ledger")
            except SourceError as exc:
                unrecognised.append(f"accounting.db: not readable, the ingest would stop on it ({exc})")
        if (self.path / "payloads").is_dir():
            planes.append("payloads")
        imported = sum(
            sum(1 for n in b.column("imported_nonce").to_pylist() if n)
            for e in self.epochs()
            for b in self.read("sessions", e)
        )
        snapshots = describe_snapshots((b for e in self.epochs() for b in self.read("snapshots", e)), imported)
        return SourceDescription(
            kind=self.kind,
            display=self.display,
            source_id=self.source_id,
            lineage_id=None,
            epochs=self.epochs(),
            schema_versions=versions,
            tables=list(reports.values()),
            unrecognised=unrecognised,
            planes=planes,
            release_lines=lines,
            snapshots=snapshots,
        )

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def _select(spec, physical: str, present: list[str], cursors: dict[str, int] | None) -> tuple[str, tuple]:
    """SELECT of the canonical columns that exist, behind one typed witness row."""
    cols = [f for f in spec.schema if f.name in present]
    witness = ", ".join(f'{WITNESS[f.type]} AS "{f.name}"' for f in cols)
    real = ", ".join(f't."{f.name}"' for f in cols)
    sql = f'SELECT 1 AS __witness, {witness} UNION ALL SELECT 0, {real} FROM "{physical}" t'
    params: tuple = ()
    if cursors is not None:
        # diffs and signatures are append-only: only nonces past the cursor; other escrow tables change in place.
        past = " WHERE t.nonce > c.value" if spec.name in APPEND_ONLY else ""
        sql += f" JOIN json_each(?) c ON c.key = t.escrow_id{past}"
        params = (json.dumps(cursors),)
    return sql, params
