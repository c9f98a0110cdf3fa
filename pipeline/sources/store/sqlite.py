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
import stat
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.core.sqlnames import quote_ident
from pipeline.sources.files import FileReadError, copy_regular_file, describe_mode, unusable_reason
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
# The SQLite storage class each canonical type must have (anything else is a problem row, not a cast).
STORAGE_CLASS = {pa.int64(): "integer", pa.string(): "text", pa.binary(): "blob", pa.bool_(): "integer"}
INT64_MAX = (1 << 63) - 1
# The largest value read from a cell (a blob in bytes, a text in characters): far above any real diff,
# checkpoint or JSON column; a larger one sets its row aside instead of filling memory.
MAX_VALUE_BYTES = 64 << 20
# Files of a store directory besides the epoch files: read by the session ingest, or by a plane ingester.
READ_FILES = {"_meta.db": "the escrow index and cache", "accounting.db": "the accounting ledger"}
NOT_READ_FILES = {"gateway.db": "the gateway's own store: no evidence reads it"}
COMPANIONS = ("-wal", "-shm", "-journal")
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
        self._rejected: list[Problem] = []  # rows set aside by the reads, taken by the ingest
        # Every entry of the store directory: None when it is read, else why it is not.
        self.files: dict[str, str | None] = {}
        self._epoch_files = self._inventory()

    # -- files -----------------------------------------------------------------
    def _inventory(self) -> dict[int, Path]:
        """The epoch files to read; every other entry of the directory gets its reason in `files`."""
        claims: dict[int, list[Path]] = {}
        for p in sorted(self.path.iterdir()):
            self.files[p.name] = None
            if p.name.endswith(COMPANIONS) and (self.path / p.name.rsplit("-", 1)[0]).exists():
                continue  # judged with its database below
            if (m := EPOCH_FILE.match(p.name)) is not None:
                self._claim_epoch(p, m.group(1), claims)
            else:
                self.files[p.name] = self._other_entry(p)
        epochs = {}
        for epoch, paths in claims.items():
            if len(paths) == 1:
                epochs[epoch] = paths[0]
                continue
            names = ", ".join(p.name for p in paths)
            for p in paths:
                self.files[p.name] = f"{len(paths)} files claim epoch {epoch} ({names}): none of them is read"
        for name, why in list(self.files.items()):  # a database not read takes its companion files along
            for suffix in COMPANIONS:
                if why is not None and f"{name}{suffix}" in self.files:
                    self.files[f"{name}{suffix}"] = f"companion of {name}, which is not read"
        return dict(sorted(epochs.items()))

    def _claim_epoch(self, p: Path, number: str, claims: dict[int, list[Path]]) -> None:
        """An epoch file claims its epoch when it can be read; otherwise its reason goes to `files`."""
        epoch = int(number)
        if epoch > INT64_MAX:
            self.files[p.name] = f"epoch number {number} is out of range (past 64 bits): not read"
        elif (why := self._unusable(p)) is not None:
            self.files[p.name] = why
        else:
            claims.setdefault(epoch, []).append(p)

    def _other_entry(self, p: Path) -> str | None:
        """Why an entry of the store directory that is not an epoch file is not read (None: it is read)."""
        if p.name == "payloads":
            return _not_a_payload_directory(p)
        if p.name in READ_FILES:
            return self._unusable(p)
        if p.name in NOT_READ_FILES:
            return f"not read: {NOT_READ_FILES[p.name]}"
        if MIGRATED_FILE.match(p.name):
            return "migrated to PostgreSQL: not read"
        if p.name == LEGACY_STORE_FILE:
            return f"not read, {LEGACY_STORE_REASON}"
        return "not part of a devshard store: not read"

    def _unusable(self, file: Path) -> str | None:
        """Why a database file (with its -wal/-shm/-journal) cannot be read, or None."""
        for suffix in ("", *COMPANIONS):
            part = Path(f"{file}{suffix}")
            if (suffix == "" or part.is_symlink() or part.exists()) and (why := unusable_reason(part, self.path)):
                return f"{part.name} is {why}: not read" if suffix else f"{why}: not read"
        return None

    def take_rejected(self) -> list[Problem]:
        """The rows the reads set aside since the last call (table, key, reason), each with its reason."""
        taken, self._rejected = self._rejected, []
        return taken

    def _connect(self, file: Path):
        key = str(file)
        if key in self._conns:
            return self._conns[key]
        if (why := self._unusable(file)) is not None:
            raise SourceError(f"{file}: {why}")
        if Path(f"{file}-wal").exists() or Path(f"{file}-journal").exists():
            if self._tmp is None:
                self._tmp = tempfile.TemporaryDirectory(prefix="gonka-evidence-sqlite-")
            private = Path(self._tmp.name) / file.name
            for suffix in ("", *COMPANIONS):
                if Path(f"{file}{suffix}").exists():
                    try:  # checked above: regular files inside the store, copied up to their size
                        copy_regular_file(Path(f"{file}{suffix}"), Path(f"{private}{suffix}"))
                    except FileReadError as exc:
                        raise SourceError(f"{file}{suffix}: {exc}") from None
            uri = sqlite_uri(private, "mode=rw")
        else:
            uri = sqlite_uri(file, "mode=ro&immutable=1")
        conn = cur = None
        try:
            conn = adbc_sqlite.connect(uri)
            cur = conn.cursor()
            cur.execute("SELECT count(*) FROM sqlite_master")
            cur.fetchall()
            cur.close()
        except Exception as exc:  # the driver's error names the file; keep it to one line
            _close_quietly(cur, conn)  # else the driver's finalizer prints a traceback on exit
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
        """Columns of a table of the file (None when there is no such table: views are never read)."""
        rows = self._query(
            file,
            "SELECT name FROM pragma_table_info(?) WHERE (SELECT type FROM sqlite_master WHERE name = ?) = 'table'",
            (table, table),
        )
        return rows.column("name").to_pylist() or None

    def tables_not_read(self) -> list[tuple[str, str, str]]:
        """(table, file, why) of every table of the session files (`_meta.db`, epoch files) that no
        read takes (the ledger plane reads accounting.db)."""
        files = ([self.path / "_meta.db"] if self.files.get("_meta.db", "absent") is None else []) + list(
            self._epoch_files.values()
        )
        read = {phys for _, phys in PHYSICAL.values()} | (set(TABLES) - set(PHYSICAL))
        found = []
        for file in files:
            names = self._query(file, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            for name in names.column("name").to_pylist():
                if not name.startswith("sqlite_") and name not in read:
                    found.append((name, file.name, not_read_reason(name)))
        return found

    def not_a_table(self, table: str, epoch_id: int | None) -> str | None:
        """Why a logical table that the file names is not read (a view or a virtual table), or None."""
        located = self._locate(table, epoch_id)
        if located is None:
            return None
        rows = self._query(located[0], "SELECT type, sql FROM sqlite_master WHERE name = ?", (located[1],)).to_pylist()
        if not rows:
            return None
        kind, sql = rows[0]["type"], rows[0]["sql"] or ""
        if kind != "table":
            return f"{located[0].name}: {located[1]} is a {kind}, not a table: a copy's views are never read"
        if sql.upper().startswith("CREATE VIRTUAL"):
            return f"{located[0].name}: {located[1]} is a virtual table: not read"
        return None

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
            return (file, name) if self.files.get(file.name, "absent") is None else None  # present and usable
        if epoch_id not in self._epoch_files:
            return None
        return self._epoch_files[epoch_id], table

    def columns(self, table: str, epoch_id: int | None) -> list[str] | None:
        located = self._locate(table, epoch_id)
        if located is None or self.not_a_table(table, epoch_id) is not None:
            return None
        return self._physical_columns(*located)

    def read(
        self,
        table: str,
        epoch_id: int | None,
        cursors: dict[str, int] | None = None,
        batch_rows: int = 65536,
        *,
        escrows: EscrowRange | None = None,
    ) -> Iterator[pa.RecordBatch]:
        spec = TABLES[table]
        located = self._locate(table, epoch_id)
        if located is None:
            return
        file, physical = located
        present = self.columns(table, epoch_id)
        if present is None:
            return
        require_columns(spec, present, f"{file.name}: table {physical}")
        sql, params = _select(spec, physical, present, cursors if table in ESCROW_SCOPED else None, escrows)
        for batch in self.query_file_batches(file, sql, params, batch_rows, what=f"reading {physical}"):
            batch = batch.filter(pc.equal(batch.column("__witness"), 0)).drop_columns(["__witness"])
            batch, rejected = split_rejected(batch, spec, f"{file.name}")
            self._rejected += rejected
            if batch.num_rows:
                yield conform(batch, spec, epoch_id if spec.per_epoch else None)

    def escrow_weights(self) -> list[tuple[str, int]]:
        """Every escrow of the sessions, in byte order (the order of `escrows=` ranges), with its diff count
        as the sessions state it (latest nonce past the import): what the network lake's stage 1 cuts a
        copy by. An id that is no UTF-8 text is left out (it still lies in some range)."""
        weights: dict[bytes, int] = {}
        for epoch in self.epochs():
            present = self.columns("sessions", epoch) or []
            if "escrow_id" not in present:
                continue
            nonce = [
                f"coalesce(CASE WHEN typeof({_col(c)}) = 'integer' THEN {_col(c)} END, 0)"
                for c in ("latest_nonce", "imported_nonce")
                if c in present
            ]
            diffs = f"max({' - '.join(nonce)}, 0)" if nonce else "0"
            sql = (
                f"SELECT CAST(t.escrow_id AS BLOB) AS k, {diffs} + 1 AS n FROM sessions t "
                "WHERE typeof(t.escrow_id) = 'text'"
            )
            for batch in self.query_file_batches(self._epoch_files[epoch], sql, what="weighing sessions"):
                for key, n in zip(batch.column("k").to_pylist(), batch.column("n").to_pylist(), strict=True):
                    weights[key] = weights.get(key, 0) + n
        found = []
        for key in sorted(weights):
            try:
                found.append((key.decode("utf-8"), weights[key]))
            except UnicodeDecodeError:
                continue
        return found

    def read_orphans(self, table: str, epoch_id: int, escrows: list[str]) -> list[str]:
        """Keys of the rows of an escrow-scoped table of one epoch whose escrow is none of `escrows` (the
        epoch's sessions the ingest uses): rows no session claims, read by no cursor, so named here."""
        located = self._locate(table, epoch_id)
        if located is None or self.columns(table, epoch_id) is None:
            return []
        file, physical = located
        key = " || '/' || ".join(_key_text(f't."{c}"') for c in TABLES[table].key)
        sql = (
            f"SELECT CAST({key} AS BLOB) AS k FROM \"{physical}\" t WHERE typeof(t.escrow_id) <> 'text' "
            "OR t.escrow_id NOT IN (SELECT value FROM json_each(?))"
        )
        batches = self.query_file_batches(file, sql, (json.dumps(escrows),), what=f"checking {physical}")
        return [k.decode("utf-8", "backslashreplace") for b in batches for k in b.column("k").to_pylist() if k]

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
        files = [self.path / "_meta.db"] if self.files.get("_meta.db", "absent") is None else []
        files += list(self._epoch_files.values())
        reports: dict[str, TableReport] = {}
        unrecognised: list[str] = []
        versions: dict[str, int | None] = {}
        lines: dict[str, str] = {}
        for file in files:
            versions[file.name] = self.schema_version(file)
            lines[file.name] = self.release_line(file)
            epoch = next((e for e, f in self._epoch_files.items() if f == file), None)
            others = self._query(file, "SELECT type, name FROM sqlite_master WHERE type IN ('view', 'trigger')")
            unrecognised += [
                f"{file.name}: {r['type']} {r['name']} (a copy's views and triggers are never read)"
                for r in others.to_pylist()
            ]
            unrecognised += self._report_tables(file, epoch, reports)
        unrecognised += [f"{name}: {why}" for name, why in self.files.items() if why is not None]
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

    def _report_tables(self, file: Path, epoch: int | None, reports: dict[str, TableReport]) -> list[str]:
        """Each table of `file` into its report (rows in this epoch, columns missing and extra); returns
        the tables that are not part of a store."""
        unrecognised = []
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
        return unrecognised

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def _not_a_payload_directory(path: Path) -> str | None:
    """Why `payloads` is not the payload directory (None: it is one): the plane would be absent in silence."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        return f"cannot be opened ({exc.strerror}): the payload plane is not read"
    except RuntimeError:  # a symlink loop
        return "a symlink loop: the payload plane is not read"
    if stat.S_ISDIR(mode):
        return None
    return f"not a directory ({describe_mode(mode)}): the payload plane is not read"


def _key_text(column: str) -> str:
    """SQL: a key column as quarantine names it, whatever it holds (NULL, bytes as hex)."""
    return (
        f"CASE typeof({column}) WHEN 'null' THEN 'NULL' WHEN 'blob' THEN hex({column}) ELSE CAST({column} AS TEXT) END"
    )


def _col(name: str) -> str:
    return f't."{name}"'


def _check(name: str, storage: str) -> str:
    """SQL: why a cell is not read as its column claims ('' when it is): another storage class, or too large."""
    return (
        f"CASE WHEN typeof({_col(name)}) NOT IN ('{storage}', 'null') "
        f"THEN '{name} holds ' || typeof({_col(name)}) || ', not {storage}; ' "
        f"WHEN length({_col(name)}) > {MAX_VALUE_BYTES} THEN '{name} is larger than {MAX_VALUE_BYTES:,} bytes; ' "
        "ELSE '' END"
    )


def escrow_range_sql(escrows: EscrowRange | None) -> tuple[list[str], tuple]:
    """SQL conditions (and their parameters) keeping the rows of `t` whose escrow lies in `escrows`, by
    bytes (BINARY, the order `escrow_weights` gives): a NULL or a number lies below every bound (SQLite
    orders them before text), a blob above, so ranges that meet cover every row once."""
    if escrows is None:
        return [], ()
    low, below = escrows
    where, params = [], []
    if low is not None:
        where.append("t.escrow_id COLLATE BINARY >= ?")
        params.append(low)
    if below is not None:  # the first range also holds the NULL ids
        below_sql = "t.escrow_id COLLATE BINARY < ?"
        where.append(below_sql if low is not None else f"({below_sql} OR t.escrow_id IS NULL)")
        params.append(below)
    return where, tuple(params)


def _select(
    spec, physical: str, present: list[str], cursors: dict[str, int] | None, escrows: EscrowRange | None = None
) -> tuple[str, tuple]:
    """SELECT of the canonical columns that exist, behind one typed witness row.

    A SQLite column holds whatever was written to it, so each value is read only when its storage
    class is the one the canonical type claims; otherwise it is read as NULL and `__problem` says
    which column held what (the row is then set aside by `split_rejected`), and `__key` names it."""
    cols = [f for f in spec.schema if f.name in present]
    witness = ", ".join(f'{WITNESS[f.type]} AS "{f.name}"' for f in cols)
    checks = " || ".join(_check(f.name, STORAGE_CLASS[f.type]) for f in cols)
    key = " || '/' || ".join(_key_text(f't."{c}"') for c in spec.key if c in present)
    typed = ", ".join(
        f"CASE WHEN typeof({_col(f.name)}) = '{STORAGE_CLASS[f.type]}' AND length({_col(f.name)}) <= {MAX_VALUE_BYTES} "
        f'THEN {_col(f.name)} END AS "{f.name}"'
        for f in cols
    )
    names = ", ".join(f'"{f.name}"' for f in cols)
    inner = f'SELECT {checks} AS p, CAST({key} AS BLOB) AS k, {typed} FROM "{physical}" t'
    params: tuple = ()
    where = []
    if cursors is not None:
        # diffs and signatures are append-only: only nonces past the cursor (and any nonce that is no
        # count: it is set aside with its reason, never skipped); other escrow tables change in place.
        inner += " JOIN json_each(?) c ON c.key = t.escrow_id"
        params = (json.dumps(cursors),)
        if spec.name in APPEND_ONLY:
            where.append("(t.nonce > c.value OR typeof(t.nonce) <> 'integer' OR t.nonce <= 0)")
    range_sql, range_params = escrow_range_sql(escrows)
    where += range_sql
    params += range_params
    if where:
        inner += " WHERE " + " AND ".join(where)
    sql = (
        f"SELECT 1 AS __witness, '' AS __problem, X'' AS __key, {witness} UNION ALL "
        f"SELECT 0, p, CASE WHEN p <> '' THEN k END, {names} FROM ({inner})"
    )
    return sql, params


def _close_quietly(*handles) -> None:
    """Close a failed open's cursor, then its connection (the driver refuses the reverse order)."""
    for handle in handles:
        if handle is not None:
            try:
                handle.close()
            except Exception:  # already broken: nothing left to release
                pass
