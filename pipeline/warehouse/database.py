"""The DuckDB warehouse file: schema, transactions, read-only connections.

DuckDB runs a multi-statement string as separate statements, not as one
transaction, so every write unit here is an explicit BEGIN … COMMIT (an ingest's data and its cursor commit together).
"""

from __future__ import annotations

import atexit
import datetime as dt
import errno
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from pipeline.core.errors import UserError

if TYPE_CHECKING:
    import polars as pl

from pipeline.core.chain import defaults_sql
from pipeline.core.env import env_size
from pipeline.core.paths import DEFAULT_WAREHOUSE, SQL_DIR
from pipeline.core.resources import THREADS_ENV, DuckDBBudget, duckdb_budget
from pipeline.core.sqlnames import quote_ident, quote_string

SCHEMA_VERSION = "1"
# warehouse_meta key: sha256 of the schema and view scripts that last ran on the warehouse.
SCHEMA_DIGEST_KEY = "schema_digest"
# DuckDB's buffer pool defaults to 80% of RAM; a bounded one keeps an ingest's RSS flat whatever the
# warehouse size (it spills to disk instead). Each is a base: the pool grows with the threads
# (pipeline/core/resources.py), and the variable, when set, is the limit itself.
MEMORY_ENV, DEFAULT_MEMORY_LIMIT = "GONKA_EVIDENCE_DUCKDB_MEMORY", "1GB"
# While ingesting: a base, plus the threads' and the warehouse's share (`ingest_budget`). The pool keeps
# the newest table blocks cached up to its limit, so with the general 1GB an ingest's RSS grew with the
# warehouse (2M copy: 280 MB of cached blocks at the end, peak 1.21 GiB vs 0.99 at 500k). A chunk's
# statements touch one chunk of rows, so a small base costs nothing (measured: 2M ingest 95 -> 82 s, peak
# 0.90 GiB at both sizes); the warehouse's part makes room for the rows they join against.
INGEST_MEMORY_ENV, DEFAULT_INGEST_MEMORY = "GONKA_EVIDENCE_INGEST_MEMORY", "200MB"


class WarehouseError(UserError):
    """A warehouse that cannot be opened as asked; one-line message."""


class OutOfMemory(WarehouseError):
    """DuckDB ran out of the memory it was given; the message names the variable to raise."""


def out_of_memory(what: str, budget: DuckDBBudget | None = None) -> OutOfMemory:
    """The one-line error for DuckDB's OutOfMemoryException during `what` (``the query``) under `budget`
    (default: what a warehouse connection gets)."""
    budget = budget or duckdb_budget(MEMORY_ENV, DEFAULT_MEMORY_LIMIT)
    return OutOfMemory(
        f"{what} ran out of memory (DuckDB {budget.describe()}): raise {budget.memory_env} or lower {THREADS_ENV}"
    )


# What a write that the file system refuses raises: DuckDB's own I/O and commit errors (a full disk
# fails the commit's WAL write), the fatal error that invalidates the database after one, and the
# file system's errors for the files Python itself writes.
_DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EFBIG}


@contextmanager
def disk_errors(path: Path | str) -> Iterator[None]:
    """A write to the warehouse at `path` that the disk refuses ends as a one-line WarehouseError."""
    try:
        yield
    except (duckdb.IOException, duckdb.TransactionException, duckdb.FatalException) as exc:
        raise WarehouseError(f"{path}: cannot write the warehouse ({str(exc).splitlines()[0]})") from None
    except OSError as exc:
        if exc.errno not in _DISK_ERRNOS:
            raise
        raise WarehouseError(f"{exc.filename or path}: cannot write ({exc.strerror or exc})") from None


def run_order(con: duckdb.DuckDBPyConnection, alias: str = "") -> str:
    """The SQL expression that orders ingest runs as they were made (then by `started_at`): `run_seq`, 0
    for runs made before it; just 0 in a warehouse made before the column and opened read-only (no
    upgrade has added it yet)."""
    ((found,),) = con.execute(
        "SELECT count(*) FROM duckdb_columns() WHERE table_name = 'ingest_runs' AND column_name = 'run_seq'"
    ).fetchall()
    return f"coalesce({alias}run_seq, 0)" if found else "0"


def _connect(path: Path, read_only: bool, own_instance: bool = False) -> duckdb.DuckDBPyConnection:
    """A connection to the warehouse file. `own_instance`: the file attached read-only to an in-memory
    database of its own, where DuckDB would otherwise share one instance (and its settings: a sandbox's
    locked ones included) between every connection of this process to the file."""
    _refuse_special(path)
    try:
        # Absolute: DuckDB would expand a leading "~" that every other part of the pipeline takes literally
        # (an in-memory database stays one: made absolute, ":memory:" would name a file).
        target = str(path) if str(path) == ":memory:" else os.path.abspath(path)
        con = _attached(target) if own_instance else duckdb.connect(target, read_only=read_only)
    except duckdb.ResourceInUseException:  # only an instance of this process's own can hold it so
        raise WarehouseError(f"{path}: the warehouse is open for writing in this process; close it first") from None
    except duckdb.IOException as exc:
        text = str(exc)
        if "lock" in text.lower():
            raise WarehouseError(
                f"{path}: the warehouse is in use by another gonka-evidence process; try again when it ends"
            ) from None
        raise WarehouseError(f"{path}: cannot open the warehouse ({text.splitlines()[0]})") from None
    except duckdb.Error as exc:
        raise WarehouseError(f"{path}: cannot open the warehouse ({str(exc).splitlines()[0]})") from None
    con.execute("SET TimeZone = 'UTC'")
    _apply(con, duckdb_budget(MEMORY_ENV, DEFAULT_MEMORY_LIMIT))
    return con


def _attached(target: str) -> duckdb.DuckDBPyConnection:
    """An in-memory database of its own with the file `target` attached read-only, named and used as DuckDB
    names a file it opens (by its stem; a stem DuckDB keeps for its own databases gets a suffix); the
    in-memory one is detached, so the warehouse is all it names."""
    con = duckdb.connect(":memory:")
    try:
        stem = Path(target).stem
        stem += "_warehouse" if stem.lower() in ("memory", "system", "temp") else ""
        con.execute(f"ATTACH {quote_string(target)} AS {quote_ident(stem)} (READ_ONLY)")
        con.execute(f"USE {quote_ident(stem)}")
        con.execute("DETACH memory")
    except BaseException:
        con.close()
        raise
    return con


def _refuse_special(path: Path) -> None:
    """A warehouse path that is not a regular file (nor missing) is refused before DuckDB opens it: a FIFO
    or a device would block the open or never end. A path of the config file gets here too."""
    import os
    import stat

    from pipeline.core.files import describe_mode

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        reason = "a symlink loop" if exc.errno == errno.ELOOP else f"cannot be reached ({exc.strerror})"
        raise WarehouseError(f"{path}: {reason}") from None
    if not stat.S_ISREG(mode):
        raise WarehouseError(f"{path}: {describe_mode(mode)}, not a warehouse file")
    try:
        duckdb_file = is_duckdb_file(path)
    except OSError as exc:  # a regular file that cannot be read (permissions, /proc/self/mem)
        raise WarehouseError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if not duckdb_file:
        raise WarehouseError(f"{path}: not a DuckDB database file, not a warehouse file")


def is_duckdb_file(path: Path) -> bool:
    """Whether the regular file at `path` is empty (DuckDB makes a database of it) or begins as a DuckDB
    database does ("DUCK" after the header's checksum). Told before DuckDB opens it: DuckDB would take a
    SQLite file for one it reads through its sqlite extension, and try to download that extension."""
    with open(path, "rb") as handle:
        head = handle.read(12)
    return not head or head[8:12] == b"DUCK"


def _apply(con: duckdb.DuckDBPyConnection, budget: DuckDBBudget) -> None:
    # Together: DuckDB's default is a thread per core of the machine, each needing memory of its own.
    con.execute(f"SET threads = {budget.threads}")
    con.execute(f"SET memory_limit = '{budget.memory_limit}'")
    # DuckDB 2's asynchronous I/O pool starts 8 threads per database whatever the cores: as many as the
    # connection's threads instead (measured: 9 threads a database at threads = 1, 2 with this).
    con.execute(f"SET async_threads = {budget.threads}")


def open_scratch() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the threads and memory limit of a warehouse connection."""
    con = duckdb.connect()
    _apply(con, duckdb_budget(MEMORY_ENV, DEFAULT_MEMORY_LIMIT))
    return con


def ingest_budget(con: duckdb.DuckDBPyConnection) -> DuckDBBudget:
    """The ingest's memory limit for the threads `con` runs and the warehouse it writes: each chunk's
    statements join the chunk to the warehouse's rows and every thread pins blocks of the tables it scans,
    so the limit grows with the warehouse's data (the 1M network's copies one after another at 16 threads:
    the fifth ran out at 264MB, with 229MB of warehouse) up to the process's share (`duckdb_budget`)."""
    return duckdb_budget(INGEST_MEMORY_ENV, DEFAULT_INGEST_MEMORY, int(_setting(con, "threads")), data_bytes(con))


def data_bytes(con: duckdb.DuckDBPyConnection) -> int:
    """The bytes of the blocks that `con`'s database holds data in (0 for a new one)."""
    row = con.execute(
        "SELECT used_blocks * block_size FROM pragma_database_size() WHERE database_name = current_database()"
    ).fetchall()
    return int(row[0][0] or 0) if row else 0


@contextmanager
def ingest_memory(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """The ingest's memory limit for the block, sized for the connection's threads (the caller's limit
    again after); DuckDB running out of it is a one-line OutOfMemory naming GONKA_EVIDENCE_INGEST_MEMORY."""
    budget = ingest_budget(con)
    try:
        with duckdb_setting(con, "memory_limit", budget.memory_limit):
            yield
    except duckdb.Error as exc:
        if not ran_out_of_memory(exc):
            raise
        raise out_of_memory("the ingest", budget) from None


def ran_out_of_memory(exc: BaseException) -> bool:
    """Whether `exc` is DuckDB's OutOfMemoryException or was raised while handling one: a clean-up in
    the aborted transaction (an `unregister` in a `finally`) raises a TransactionException instead."""
    seen: set[int] = set()
    pending: BaseException | None = exc
    while pending is not None and id(pending) not in seen:
        if isinstance(pending, duckdb.OutOfMemoryException):
            return True
        seen.add(id(pending))
        pending = pending.__cause__ or pending.__context__
    return False


def open_for_write(path: Path | str = DEFAULT_WAREHOUSE, abort_abandoned: bool = True) -> duckdb.DuckDBPyConnection:
    """Open (creating if needed) and bring the schema and views up to date; with `abort_abandoned`,
    mark the ingest runs that a killed writer left ``running`` as ``aborted``."""
    path = Path(path)
    schema = sorted((SQL_DIR / "warehouse" / "schema").glob("*.sql"))
    if not schema:
        raise WarehouseError(
            f"{SQL_DIR}: the warehouse schema files are missing (an incomplete installation? reinstall gonka-evidence)"
        )
    # Tables first, then the chain parameters' defaults (a macro written from pipeline/core/chain.py, so
    # the rules have one table of them), then views; each in file-name order (one file per feature area).
    scripts = [
        *(p.read_text(encoding="utf-8") for p in schema),
        defaults_sql(),
        *(p.read_text(encoding="utf-8") for p in sorted((SQL_DIR / "warehouse" / "views").glob("*.sql"))),
    ]
    digest = hashlib.sha256("\0".join([SCHEMA_VERSION, *scripts]).encode()).hexdigest()
    con = _connect(path, read_only=False)
    try:
        refuse_foreign(con, path)
    except WarehouseError:
        con.close()
        raise
    # The scripts are idempotent, so a warehouse they last ran on with the same text is up to date:
    # running them again took 0.2-0.5 s of a no-op ingest on a loaded host (docs/data-model.md).
    if _stored_schema_digest(con) != digest:
        try:
            with transaction(con):
                for script in scripts:
                    con.execute(script)
                con.execute(
                    "INSERT OR REPLACE INTO warehouse_meta VALUES ('schema_version', ?), (?, ?)",
                    [SCHEMA_VERSION, SCHEMA_DIGEST_KEY, digest],
                )
        except duckdb.Error as exc:  # a table of one of our names that is not ours: rolled back, untouched
            con.close()
            if ran_out_of_memory(exc):
                raise out_of_memory("opening the warehouse") from None
            raise WarehouseError(
                f"{path}: not a gonka-evidence warehouse of this release (its tables do not match the schema: "
                f"{str(exc).splitlines()[0]}); gonka-evidence leaves it untouched"
            ) from None
    if abort_abandoned:
        abort_abandoned_runs(con)
    return con


# What makes a DuckDB file a gonka-evidence warehouse: the schema's first script creates this table and
# records its version in it. A file with other relations is another application's and is never written.
META_TABLE = "warehouse_meta"


def warehouse_state(con: duckdb.DuckDBPyConnection) -> str:
    """``"warehouse"`` (a gonka-evidence warehouse), ``"empty"`` (no table or view of its own) or ``"foreign"``:
    relations but no warehouse_meta table of (key, value) naming a schema version."""
    names = {
        name
        for (name,) in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE NOT internal AND database_name = current_database() "
            "UNION ALL SELECT view_name FROM duckdb_views() WHERE NOT internal AND database_name = current_database()"
        ).fetchall()
    }
    if not names:
        return "empty"
    columns = con.execute(
        "SELECT list(column_name ORDER BY column_index) FROM duckdb_columns() "
        "WHERE table_name = ? AND database_name = current_database() AND NOT internal",
        [META_TABLE],
    ).fetchall()
    is_table = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = ? AND database_name = current_database()",
        [META_TABLE],
    ).fetchall()
    if not is_table[0][0] or columns[0][0] != ["key", "value"]:
        return "foreign"
    rows = con.execute(f"SELECT value FROM {META_TABLE} WHERE key = 'schema_version'").fetchall()
    return "warehouse" if rows else "foreign"


def stored_schema_version(con: duckdb.DuckDBPyConnection) -> str | None:
    rows = con.execute(f"SELECT value FROM {META_TABLE} WHERE key = 'schema_version'").fetchall()
    return str(rows[0][0]) if rows else None


def refuse_foreign(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """A one-line error unless the file behind `con` is a gonka-evidence warehouse or holds nothing yet."""
    try:
        state = warehouse_state(con)
    except duckdb.Error as exc:
        if ran_out_of_memory(exc):
            raise out_of_memory("opening the warehouse") from None
        raise WarehouseError(f"{path}: not a gonka-evidence warehouse ({str(exc).splitlines()[0]})") from None
    if state == "foreign":
        raise WarehouseError(
            f"{path}: a DuckDB file of another application (it has tables but no gonka-evidence {META_TABLE}); "
            "gonka-evidence leaves it untouched: name a new warehouse file"
        )
    if state == "warehouse":
        refuse_newer(stored_schema_version(con), path)


def refuse_newer(stored: str | None, path: Path) -> None:
    """A one-line error for a warehouse whose schema version is newer than this release's, or unreadable:
    its tables may mean something this release does not know, and it is never written."""
    from pipeline.core.version import pipeline_version

    ours = f"schema version {SCHEMA_VERSION} (gonka-evidence {pipeline_version()})"
    if stored is None or not stored.isdigit():
        raise WarehouseError(
            f"{path}: the warehouse's schema version {stored!r} is not a number; this release reads {ours}"
        )
    if int(stored) > int(SCHEMA_VERSION):
        raise WarehouseError(
            f"{path}: written by a newer release (schema version {stored}); this release reads {ours}: "
            "upgrade gonka-evidence"
        )


def _stored_schema_digest(con: duckdb.DuckDBPyConnection) -> str | None:
    try:
        rows = con.execute("SELECT value FROM warehouse_meta WHERE key = ?", [SCHEMA_DIGEST_KEY]).fetchall()
    except duckdb.CatalogException:  # a new file: no warehouse_meta yet
        return None
    return rows[0][0] if rows else None


# The ingest runs this process is carrying out (`loading.ingest_run` registers each). DuckDB lets
# one process at a time open a warehouse file for writing, so once this process has it open, a
# `running` row that is not one of these was left by a writer that was killed or lost its disk.
_LIVE_RUNS: set[str] = set()


@contextmanager
def live_run(run_id: str) -> Iterator[None]:
    """Mark `run_id` as carried out by this process for the duration of the block."""
    _LIVE_RUNS.add(run_id)
    try:
        yield
    finally:
        _LIVE_RUNS.discard(run_id)


def abort_abandoned_runs(con: duckdb.DuckDBPyConnection) -> int:
    """Mark ``running`` ingest runs that no live process carries out as ``aborted``; returns how many."""
    with transaction(con):
        row = first_row(
            con.execute(
                "UPDATE ingest_runs SET status = 'aborted', finished_at = now() "
                "WHERE status = 'running' AND NOT list_contains($live, run_id)",
                {"live": sorted(_LIVE_RUNS)},
            )
        )  # an UPDATE returns its count
        return int(row[0])


def open_read_only(path: Path | str = DEFAULT_WAREHOUSE, own_instance: bool = False) -> duckdb.DuckDBPyConnection:
    path = Path(path)
    if not path.exists():
        raise WarehouseError(
            f"{path}: no warehouse here yet (run `gonka-evidence ingest SOURCE` or `gonka-evidence run` first)"
        )
    con = _connect(path, read_only=True, own_instance=own_instance)
    try:
        refuse_foreign(con, path)
        if warehouse_state(con) == "empty":
            raise WarehouseError(
                f"{path}: an empty DuckDB file, no warehouse yet (run `gonka-evidence ingest SOURCE` into it first)"
            )
    except BaseException:
        con.close()
        raise
    return con


# What `query` locks down before it runs an analyst's SQL: no file, network or extension access
# (ATTACH, COPY, EXPORT, INSTALL/LOAD, read_csv/read_text/glob, secrets) and no SET afterwards.
# The engine enforces it, whatever the SQL says; the connection is read-only besides.
SANDBOX_SETTINGS = (
    "SET autoinstall_known_extensions = false",
    "SET autoload_known_extensions = false",
    "SET enable_external_access = false",
    "SET lock_configuration = true",
)


# Where a query's large sorts and joins spill: a directory of its own below the system's temporary
# directory (TMPDIR), never beside the warehouse, and bounded so that a runaway query cannot fill a disk.
QUERY_TEMP_ENV, DEFAULT_QUERY_TEMP_LIMIT = "GONKA_EVIDENCE_QUERY_TEMP_LIMIT", "4GB"


def open_sandboxed(path: Path | str = DEFAULT_WAREHOUSE) -> duckdb.DuckDBPyConnection:
    """A read-only connection that can read the warehouse and nothing else, and cannot be reconfigured;
    it spills to a temporary directory of its own of at most GONKA_EVIDENCE_QUERY_TEMP_LIMIT (4GB). Its
    database instance is its own: the settings it locks reach no other connection of this process."""
    limit = env_size(QUERY_TEMP_ENV, DEFAULT_QUERY_TEMP_LIMIT)
    con = open_read_only(path, own_instance=True)
    spill = tempfile.mkdtemp(prefix="gonka-evidence-query-")
    atexit.register(shutil.rmtree, spill, True)  # DuckDB removes its files when the connection closes
    con.execute("SET temp_directory = ?", [spill])
    con.execute(f"SET max_temp_directory_size = '{limit}'")
    for statement in SANDBOX_SETTINGS:
        con.execute(statement)
    return con


@contextmanager
def duckdb_setting(con: duckdb.DuckDBPyConnection, name: str, value: str) -> Iterator[None]:
    """`SET name = value` for the block, then the connection's own value again."""
    before = _setting(con, name)
    con.execute(f"SET {name} = '{value}'")
    try:
        yield
    finally:
        con.execute(f"SET {name} = '{before}'")


def _setting(con: duckdb.DuckDBPyConnection, name: str) -> str:
    ((value,),) = con.execute(f"SELECT current_setting('{name}')").fetchall()  # all: no unfinished result
    return str(value)


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    else:
        con.execute("COMMIT")


def first_row(result: duckdb.DuckDBPyConnection) -> tuple:
    """The first row of the statement just executed, its result read to the end: DuckDB 2 refuses the
    connection's next relation or registration while an `execute()` result is unfinished (`fetchone`
    leaves it so), so the warehouse layer never reads a result in part."""
    rows = result.fetchall()
    assert rows, "the statement returned no row"
    return rows[0]


def relation(con: duckdb.DuckDBPyConnection, sql: str, params=None) -> duckdb.DuckDBPyRelation | None:
    """A query as a relation (streamed, or handed over as Arrow), after completing whatever result an
    earlier `execute()` left on the connection: a caller that did not read one to the end cannot make
    this query fail. None for a statement that is not a query."""
    con.complete()
    return con.sql(sql, params=params)


# Inside `reads_once(con)`: the connection and the frames of the queries run on it, by (sql, params).
_READS_ONCE: ContextVar[tuple[duckdb.DuckDBPyConnection, dict[tuple[str, str], pl.DataFrame]] | None] = ContextVar(
    "reads_once", default=None
)


@contextmanager
def reads_once(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """Within it, each query `fetch_frame` runs on `con` runs once, and the same (sql, params) is answered by its
    frame: for work that only reads a warehouse nothing writes meanwhile (every section of a report asks for the
    warehouse's epochs, sources and closure). Nested, the outer scope's frames serve."""
    held = _READS_ONCE.get()
    if held is not None and held[0] is con:
        yield
        return
    token = _READS_ONCE.set((con, {}))
    try:
        yield
    finally:
        _READS_ONCE.reset(token)


def fetch_frame(con: duckdb.DuckDBPyConnection, sql: str, params=None) -> pl.DataFrame:
    """Run a query and return a Polars frame (DuckDB 2 hands results over as Arrow); inside `reads_once(con)`,
    a query run before is answered by (a clone of) its frame."""
    held = _READS_ONCE.get()
    if held is None or held[0] is not con or not _plain(params):
        return _fetch_frame(con, sql, params)
    key = (sql, repr(params))
    if (frame := held[1].get(key)) is None:
        frame = held[1][key] = _fetch_frame(con, sql, params)
    return frame.clone()


def _plain(value: object) -> bool:
    """Whether `repr(value)` tells it whole: scalars, and lists, tuples and dicts of them (an array's or a
    frame's repr elides its middle, so two of them could share one)."""
    if isinstance(value, dict):
        return all(_plain(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(_plain(v) for v in value)
    return value is None or isinstance(value, str | int | float | bool | bytes | dt.date | dt.time | dt.timedelta)


def _fetch_frame(con: duckdb.DuckDBPyConnection, sql: str, params=None) -> pl.DataFrame:
    import polars as pl  # here: opening a warehouse (an ingest of an unchanged copy) needs no Polars

    rel = relation(con, sql, params)
    assert rel is not None, "fetch_frame runs queries"
    result = pl.from_arrow(rel.to_arrow_table())
    assert isinstance(result, pl.DataFrame)
    return result
