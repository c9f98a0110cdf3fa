"""What every session-store source provides, whatever its engine.

A source knows its layout and schema variant, and yields Arrow record batches in
one canonical shape per logical table (the PostgreSQL column names, `epoch_id`
included). Columns an older build does not have come back as typed NULLs, so
the rest of the pipeline never branches on the build. A source never writes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.sources.errors import SourceError, one_line  # noqa: F401  (re-exported: every reader raises it)
from pipeline.sources.store.columns import needed_absent


@dataclass(frozen=True)
class LogicalTable:
    """One table of the session store, in canonical form."""

    name: str  # canonical name (SQLite name; PostgreSQL adds the `devshard_` prefix)
    schema: pa.Schema  # canonical columns, epoch_id first where the table is per epoch
    required: tuple[str, ...]  # columns without which the table cannot be used
    per_epoch: bool = True
    key: tuple[str, ...] = ("escrow_id",)  # the natural key of a row (quarantine names rows by it)


def _schema(*cols: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema([pa.field(n, t) for n, t in cols])


I64, TXT, BIN, BOOL = pa.int64(), pa.string(), pa.binary(), pa.bool_()

TABLES: dict[str, LogicalTable] = {
    t.name: t
    for t in [
        LogicalTable(
            "sessions",
            _schema(
                ("epoch_id", I64),
                ("escrow_id", TXT),
                ("version", TXT),
                ("creator_addr", TXT),
                ("config_json", TXT),
                ("group_json", TXT),
                ("initial_balance", I64),
                ("latest_nonce", I64),
                ("last_finalized", I64),
                ("status", TXT),
                ("settled_at", I64),
                ("imported_nonce", I64),
            ),
            required=("escrow_id", "group_json", "config_json"),
        ),
        LogicalTable(
            "diffs",
            _schema(("epoch_id", I64), ("escrow_id", TXT), ("nonce", I64), ("txs_proto", BIN), ("created_at", I64)),
            required=("escrow_id", "nonce", "txs_proto"),
            key=("escrow_id", "nonce"),
        ),
        LogicalTable(
            "sealed_inferences",
            _schema(
                ("epoch_id", I64),
                ("escrow_id", TXT),
                ("inference_id", I64),
                ("sealed_nonce", I64),
                ("obs_present", BOOL),
                ("sealed_status", I64),
                ("sealed_executor_slot", I64),
                ("sealed_votes_valid", I64),
                ("sealed_votes_invalid", I64),
                ("sealed_validated_by", BIN),
                ("sealed_model", TXT),
                ("sealed_input_length", I64),
                ("sealed_max_tokens", I64),
                ("sealed_input_tokens", I64),
                ("sealed_output_tokens", I64),
                ("sealed_reserved_cost", I64),
                ("sealed_actual_cost", I64),
                ("sealed_started_at", I64),
                ("sealed_confirmed_at", I64),
            ),
            required=("escrow_id", "inference_id", "sealed_nonce"),
            key=("escrow_id", "inference_id"),
        ),
        LogicalTable(
            "inference_validation_obs",
            _schema(("epoch_id", I64), ("escrow_id", TXT), ("inference_id", I64), ("slot_id", I64)),
            required=("escrow_id", "inference_id", "slot_id"),
            key=("escrow_id", "inference_id", "slot_id"),
        ),
        LogicalTable(
            "sealed_validation_obs",
            _schema(("epoch_id", I64), ("escrow_id", TXT), ("inference_id", I64), ("slot_id", I64)),
            required=("escrow_id", "inference_id", "slot_id"),
            key=("escrow_id", "inference_id", "slot_id"),
        ),
        LogicalTable(
            "snapshots",
            _schema(("epoch_id", I64), ("escrow_id", TXT), ("nonce", I64), ("state_data", BIN), ("created_at", I64)),
            required=("escrow_id", "nonce", "state_data"),
            key=("escrow_id", "nonce"),
        ),
        LogicalTable(  # a host's attestation of the state root at (escrow, nonce, slot): compared between copies
            "signatures",
            _schema(("epoch_id", I64), ("escrow_id", TXT), ("nonce", I64), ("slot_id", I64), ("sig", BIN)),
            required=("escrow_id", "nonce", "slot_id", "sig"),
        ),
        LogicalTable(
            "escrow_cache",
            _schema(("escrow_id", TXT), ("epoch_id", I64), ("escrow_json", TXT), ("cached_at", I64)),
            required=("escrow_id",),
            per_epoch=False,
        ),
    ]
}

# Tables a store may hold that we recognise but do not ingest (no evidence uses them).
KNOWN_NOT_INGESTED = {
    "slot_validation_obs",
    "validation_leases",
    "storage_identity",
    "session_index",
    "escrow_epoch",
    "schema_migrations",
    "validation_credits",
    "connection_lineage",  # HA line step 15: connection tokens (docs/sources.md, migrations)
    "storage_challenge",  # HA line step 14: the storage-identity challenge
}


def not_read_reason(logical: str) -> str:
    """Why a table of a session store other than the ones read is not read."""
    if logical in KNOWN_NOT_INGESTED:
        return "known, no evidence uses it"
    return "not a table of any known release line"


# Columns we recognise and deliberately do not read (signatures, hashes, obs counters).
KNOWN_UNREAD_COLUMNS = {
    "user_sig",
    "post_state_root",
    "state_hash",
    "warm_keys_json",
    "sealed_prompt_hash",
    "sealed_response_hash",
    "required_validations",
    "completed_validations",
}

# Escrow-scoped tables are read for a set of escrows beyond a per-escrow nonce cursor.
ESCROW_SCOPED = (
    "diffs",
    "sealed_inferences",
    "inference_validation_obs",
    "sealed_validation_obs",
    "snapshots",
    "signatures",
)
# Of those, the append-only ones: only their rows past the cursor (nonce > cursor) are read.
APPEND_ONLY = ("diffs", "signatures")


def require_columns(table: LogicalTable, present: list[str], where: str) -> None:
    """A one-line error when a copy's table lacks a column the pipeline cannot do without."""
    missing = [c for c in table.required if c not in present]
    if missing:
        raise SourceError(f"{where} lacks required column(s) {', '.join(missing)}")


def conform(batch: pa.RecordBatch, table: LogicalTable, epoch_id: int | None) -> pa.RecordBatch:
    """Cast a batch to the canonical schema: missing columns become typed NULLs, extra ones are dropped."""
    n = batch.num_rows
    arrays = []
    for f in table.schema:
        if f.name == "epoch_id" and epoch_id is not None and "epoch_id" not in batch.schema.names:
            arrays.append(pa.array([epoch_id] * n, type=f.type))
        elif f.name in batch.schema.names:
            col = batch.column(f.name)
            arrays.append(col if col.type == f.type else col.cast(f.type))
        else:
            arrays.append(pa.nulls(n, type=f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=table.schema)


# (table, row key, reason): a row a reader set aside, or an input it refused by name.
Problem = tuple[str, str, str]
# Key columns that count something and cannot be negative.
NON_NEGATIVE = ("nonce", "inference_id", "slot_id", "sealed_nonce")


def row_key(values: list) -> str:
    """A row's key as quarantine names it (`escrow/nonce`); bytes in a key are shown, not decoded."""
    return "/".join("NULL" if v is None else v.hex() if isinstance(v, bytes) else str(v) for v in values)


def _valid_utf8(column: pa.Array) -> list[bool] | None:
    """Per value, whether a string column holds valid UTF-8 (None: all do). SQLite returns text bytes as
    they were written and a SQL_ASCII PostgreSQL database holds any bytes, so neither is checked yet."""
    try:
        column.validate(full=True)
        return None
    except pa.ArrowInvalid:
        ok = []
        for value in column.view(pa.binary()).to_pylist():
            try:
                if value is not None:
                    value.decode("utf-8")
                ok.append(True)
            except UnicodeDecodeError:
                ok.append(False)
        return ok


def _castable(column: pa.Array, to: pa.DataType) -> list[bool] | None:
    """Per value, whether it casts to `to` (None: the whole column does)."""
    try:
        column.cast(to)
        return None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        ok = []
        for i in range(len(column)):
            try:
                column.slice(i, 1).cast(to)
                ok.append(True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                ok.append(False)
        return ok


Reasons = defaultdict[int, list[str]]  # by row, only rows with a problem (most batches: none)


def split_rejected(batch: pa.RecordBatch, table: LogicalTable, where: str) -> tuple[pa.RecordBatch, list[Problem]]:
    """The rows of a batch that are what their columns claim, and the others as problems with the reason.

    Checked for every engine: text that is not UTF-8, a NULL in a required column, a negative count key,
    a nonce 0 in a diff log. A `__problem` column (the SQLite reader's type checks, "" when none) adds its
    reason, and a `__key` column (binary) names rows whose key columns could not be read as typed."""
    names = batch.schema.names
    reasons: Reasons = defaultdict(list)
    _reader_problems(batch, reasons)
    bad_text = _invalid_text(batch, reasons)
    _uncastable(batch, table, reasons)
    _null_required(batch, table, reasons)
    _negative_counts(batch, reasons)
    _zero_nonces(batch, table, reasons)
    clean = batch.drop_columns([c for c in ("__problem", "__key") if c in names])
    if not reasons:
        return clean, []
    problems = [
        (table.name, _rejected_key(batch, table, i, bad_text), f"{where}: {'; '.join(reasons[i])}")
        for i in sorted(reasons)
    ]
    keep = pa.array([i not in reasons for i in range(batch.num_rows)], pa.bool_())
    return clean.filter(keep), problems


def _reader_problems(batch: pa.RecordBatch, reasons: Reasons) -> None:
    """The reasons of the `__problem` column, where the reader wrote one."""
    if "__problem" in batch.schema.names and pc.any(pc.not_equal(batch.column("__problem"), "")).as_py():
        for i, text in enumerate(batch.column("__problem").to_pylist()):
            if text:
                reasons[i].append(text.rstrip("; "))


def _invalid_text(batch: pa.RecordBatch, reasons: Reasons) -> dict[str, list[bool]]:
    """Text that is not UTF-8; returns, per string column holding any, which rows are valid."""
    bad_text: dict[str, list[bool]] = {}
    for f in batch.schema:
        if pa.types.is_string(f.type) and (ok := _valid_utf8(batch.column(f.name))) is not None:
            bad_text[f.name] = ok
            for i, good in enumerate(ok):
                if not good:
                    reasons[i].append(f"{f.name} is not valid UTF-8")
    return bad_text


def _uncastable(batch: pa.RecordBatch, table: LogicalTable, reasons: Reasons) -> None:
    """A column of another type (a PostgreSQL copy's own DDL) must cast value by value."""
    names = batch.schema.names
    for f in table.schema:
        if f.name in names and batch.column(f.name).type != f.type and (ok := _castable(batch.column(f.name), f.type)):
            for i, good in enumerate(ok):
                if not good:
                    reasons[i].append(f"{f.name} does not fit {f.type}")


def _null_required(batch: pa.RecordBatch, table: LogicalTable, reasons: Reasons) -> None:
    for name in table.required:
        if name in batch.schema.names and batch.column(name).null_count:
            for i, value in enumerate(batch.column(name).is_null().to_pylist()):
                if value and i not in reasons:
                    reasons[i].append(f"{name} is NULL")
    for i, why in needed_absent(batch, table.name):  # a column the copy lacks that the row needs
        reasons[i].append(why)


def _negative_counts(batch: pa.RecordBatch, reasons: Reasons) -> None:
    for name in NON_NEGATIVE:
        if name in batch.schema.names and pa.types.is_integer(batch.column(name).type):
            column = batch.column(name)
            if pc.any(pc.less(column, 0)).as_py():
                for i, value in enumerate(column.to_pylist()):
                    if value is not None and value < 0:
                        reasons[i].append(f"{name} is negative ({value})")


def _zero_nonces(batch: pa.RecordBatch, table: LogicalTable, reasons: Reasons) -> None:
    """A diff log's nonces start at 1: a nonce 0 is below every cursor, so it is named here, not skipped."""
    names = batch.schema.names
    if table.name in APPEND_ONLY and "nonce" in names and pa.types.is_integer(batch.column("nonce").type):
        zero = pc.equal(batch.column("nonce"), 0)
        if pc.any(zero).as_py():  # the usual batch has none: no per-row pass
            for i, value in enumerate(zero.to_pylist()):
                if value:
                    reasons[i].append("nonce is 0 (a diff log's nonces start at 1)")


def _rejected_key(batch: pa.RecordBatch, table: LogicalTable, i: int, bad_text: dict[str, list[bool]]) -> str:
    """Row i's key: the reader's `__key` where it wrote one, else the key columns (invalid text as bytes)."""
    names = batch.schema.names
    if "__key" in names and (raw := batch.column("__key")[i].as_py()) is not None:
        return raw.decode("utf-8", "backslashreplace")
    values = []
    for c in table.key:
        value = batch.column(c)[i].as_py() if c in names else None
        if c in bad_text and not bad_text[c][i]:
            value = batch.column(c).view(pa.binary())[i].as_py()
        values.append(value)
    return row_key(values)


@dataclass
class TableReport:
    """What `doctor` shows about one physical table."""

    name: str
    rows_by_epoch: dict[int | None, int]
    columns: list[str]
    missing_columns: list[str] = field(default_factory=list)
    extra_columns: list[str] = field(default_factory=list)


@dataclass
class SourceDescription:
    """A source as `doctor` describes it, without ingesting anything."""

    kind: str  # "postgres" | "sqlite"
    display: str  # the source as the user named it, password redacted
    source_id: str
    lineage_id: str | None
    epochs: list[int]
    schema_versions: dict[str, int | None]  # per database file (SQLite) or the database (PostgreSQL)
    tables: list[TableReport]
    unrecognised: list[str]
    planes: list[str]  # session storage, accounting ledger, payloads — whichever are present
    release_lines: dict[str, str] = field(default_factory=dict)  # per database file: recognised line
    snapshots: str = ""  # what the checkpoints hold (decoded, prefixed, undecodable, imported escrows)


# (logical table, epoch or None, cursors or None): the arguments of one SessionStore.read.
ReadRequest = tuple[str, "int | None", "dict[str, int] | None"]
# (from, below): the escrows a read keeps, in the store's own order of escrow ids: from `from` (inclusive)
# to `below` (exclusive), None for no bound. A row whose escrow id is NULL (or, in SQLite, a number) lies
# below every bound, one whose id is a blob above: ranges that meet cover every row once.
EscrowRange = tuple["str | None", "str | None"]


class SessionStore(Protocol):
    """A read-only session-storage copy (PostgreSQL database or SQLite store directory)."""

    kind: str
    display: str
    source_id: str

    def epochs(self) -> list[int]: ...

    def columns(self, table: str, epoch_id: int | None) -> list[str] | None:
        """Physical columns of a logical table (None when the table does not exist)."""

    def read(
        self, table: str, epoch_id: int | None, cursors: dict[str, int] | None = None, batch_rows: int = 65536
    ) -> Iterator[pa.RecordBatch]:
        """Canonical batches of one table (of one epoch when per epoch).

        With `cursors` ({escrow_id: nonce}), an escrow-scoped table yields only the
        rows of those escrows past the cursor (APPEND_ONLY tables: nonce > cursor; other
        tables: every row of the escrow, because their rows change in place). The SQLite and
        PostgreSQL stores also take `escrows=` (an `EscrowRange`): only the rows of the escrows in
        that range (the network lake's stage 1 reads a large copy in such pieces), and give
        `escrow_weights()`: every escrow of the sessions in the range order, with its diff count.
        """

    def read_many(
        self, requests: Sequence[ReadRequest], batch_rows: int = 65536
    ) -> AbstractContextManager[list[Iterator[pa.RecordBatch]]]:
        """The batches of several reads, one stream per request, consumed in request order inside
        the `with` block; a store may read ahead on further connections of the same snapshot."""

    def describe(self) -> SourceDescription: ...

    def close(self) -> None: ...


def describe_snapshots(batches: Iterator[pa.RecordBatch], imported: int) -> str:
    """One line on a copy's checkpoints for `doctor`: how many decode, carry the root prefix, hold
    live records, and how many escrows were joined by import."""
    from pipeline.sources.decode.snapshots import decode_snapshots

    decoded = [decode_snapshots(b) for b in batches]
    ok = sum(d.snapshots.num_rows for d in decoded)
    bad = sum(len(d.quarantined) for d in decoded)
    formats = [f for d in decoded for f in d.snapshots.column("checkpoint_format").to_pylist()]
    live = sum(d.live.num_rows for d in decoded)
    counters = len(
        {
            (e, n)
            for d in decoded
            for e, n, v in _rows(d.host_stats, "escrow_id", "snapshot_nonce", "validated")
            if v is not None
        }
    )
    models = len({(e, n) for d in decoded for e, n in _rows(d.model_stats, "escrow_id", "snapshot_nonce")})
    return (
        f"{ok:,} decoded ({formats.count('protobuf_rooted'):,} with the state-root prefix, "
        f"{formats.count('json'):,} JSON of pre-devshard-v2 builds), {bad:,} undecodable; "
        f"{live:,} live records; {imported:,} escrows joined by import (no diffs before imported_nonce); "
        f"host stats: {counters:,} with PR #1757's validated/finished, {models:,} with per-model rows"
    )


def _rows(table: pa.Table, *columns: str) -> list[tuple]:
    return list(zip(*(table.column(c).to_pylist() for c in columns), strict=True))


def stream_query(cur, sql: str, params: tuple, where: str, what: str) -> Iterator[pa.RecordBatch]:
    """The Arrow batches of one query on an ADBC cursor, which is closed after; a driver error is a
    one-line SourceError naming `where` and `what`."""
    try:
        cur.execute(sql, params)
        yield from cur.fetch_record_batch()
    except Exception as exc:
        raise SourceError(f"{where}: {what} failed ({one_line(exc)})") from None
    finally:
        cur.close()
