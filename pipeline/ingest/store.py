"""Ingest a session-store copy into the warehouse, read and settled chunk by chunk.

A chunk is a group of escrows of one epoch. A small delta (fewer than STAGE_MIN_DIFFS new diffs) holds its
chunks in memory and writes them as one, up to CHUNK_NONCES diffs at a time: their raw rows, decoded
transactions, quarantine rows, the copy's nonce ranges and recomputed derived rows commit together; the diff
cursor is the data itself (per escrow, the highest nonce this copy's source already gave,
pipeline/ingest/coverage.py), so killing the process at any instant leaves the warehouse before or after a
whole write, and a re-run continues where the last committed one ended. A larger ingest stages every
chunk's rows in files (stage 1, pipeline/ingest/staging.py) and runs the same statements once per part of
them, then derives the part, in one transaction per part (stage 2): killed, it leaves whole parts.

Only escrows holding diffs their source has not given yet, or whose session moved, are
read (incremental ingest costs what is new). A copy fills every nonce range it holds and
the warehouse lacks, whatever order copies arrive in; diffs are deduplicated on
(escrow_id, nonce) and compared by digest (a difference is a fork, quarantined). Rows
that change between copies (sessions, sealed rows, checkpoints) are ranked, the copy
further along first and the source id that sorts first last, so any order of the same
copies gives the same warehouse.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import duckdb
import polars as pl
import pyarrow as pa

from pipeline.core.digest import DigestingStore, RowDigest, input_digest_before
from pipeline.core.env import env_int
from pipeline.core.events import Progress
from pipeline.core.paths import sql_text
from pipeline.ingest import MISSING_COLUMNS, MISSING_COLUMNS_QUARANTINED
from pipeline.ingest.accounting import settle_claims
from pipeline.ingest.coverage import (
    own_cursors,
    record_copy_diffs,
    record_copy_signatures,
    refresh_escrow_coverage,
    signature_digests,
)
from pipeline.ingest.identity import refuse_unrelated_escrows
from pipeline.ingest.planes import PLANE_INGESTERS
from pipeline.ingest.runs import IngestRun, IngestSummary, Problem, ingest_run, scalar
from pipeline.ingest.staging import Stager, remove_stale
from pipeline.ingest.unchanged import stamp_ingest
from pipeline.sources.store.base import ESCROW_SCOPED, TABLES, SessionStore
from pipeline.sources.store.columns import absent_columns, refuse_absent_columns
from pipeline.warehouse.database import fetch_frame, ingest_memory, transaction

if TYPE_CHECKING:
    from pipeline.ingest.derive import DeriveOutcome
    from pipeline.sources.decode.workers import Decoding, DiffDecoder

# Diffs per chunk: bounds memory whatever the copy size (tunable, e.g. smaller for tiny machines).
CHUNK_NONCES = env_int("GONKA_EVIDENCE_CHUNK_NONCES", 100_000, 1, 10**9, "diffs per chunk")
# New diffs from which a copy is decoded by worker processes (below, their start-up costs more than they save).
MIN_WORKER_DIFFS = 50_000
# New diffs from which an ingest is staged and written once (pipeline/ingest/staging.py): more than one
# chunk's. A delta of one chunk or less writes each table once anyway, and skips the files.
STAGE_MIN_DIFFS = env_int(
    "GONKA_EVIDENCE_STAGE_DIFFS", CHUNK_NONCES + 1, 1, 10**12, "new diffs from which an ingest is staged"
)
# Diffs per staged part, each written in one transaction: the uncommitted rows and their key indexes that
# DuckDB holds until the commit grow with it (2M diffs in one: peak RSS 1.67 GiB, bench/BENCHMARKS.md).
STAGE_PART_DIFFS = env_int("GONKA_EVIDENCE_STAGE_PART_DIFFS", 500_000, 1, 10**12, "diffs per staged part")
# Stored diffs per derive call in stage 2: half a chunk's, as the derive reads the part's rows before they are
# committed, and peaks higher (500k copy: 0.99 GiB with a chunk's, 0.76 GiB with half).
STAGE_DERIVE_DIFFS = env_int("GONKA_EVIDENCE_STAGE_DERIVE_DIFFS", 50_000, 1, 10**12, "diffs per staged derive")
KNOWN_SESSION_STATUS = {"active", "settled"}
KNOWN_TIMEOUT_REASONS = {0, 1, 2, 3}
REQUIRED_PER_EPOCH = ("sessions", "diffs")
# What a chunk reads, in this order (the diffs first: decoding them is the long part).
CHUNK_TABLES = (
    "diffs",
    "sealed_inferences",
    "inference_validation_obs",
    "sealed_validation_obs",
    "snapshots",
    "signatures",  # only compared between copies (pipeline/ingest/coverage.py)
)
# The accounting's input of each table read (both observation tables fill raw_validation_obs).
ACCOUNT_AS = {"inference_validation_obs": "validation_obs", "sealed_validation_obs": "validation_obs"}


def _register(con: duckdb.DuckDBPyConnection, name: str, data: pa.Table | pa.RecordBatchReader | pl.DataFrame) -> None:
    con.register(name, data.to_arrow() if isinstance(data, pl.DataFrame) else data)


def _frame(data: pa.Table) -> pl.DataFrame:
    frame = pl.from_arrow(data)
    assert isinstance(frame, pl.DataFrame)
    return frame


def _table(batches: list[pa.RecordBatch], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_batches(batches, schema=schema) if batches else schema.empty_table()


def ingest_store(
    con: duckdb.DuckDBPyConnection,
    store: SessionStore,
    label: str | None = None,
    progress: Progress | None = None,
    derive: bool = True,
    decode_workers: int | None = None,
) -> IngestSummary:
    """Ingest one copy (see the module docstring). With ``derive=False`` the changed escrows are not
    derived: the summary lists them (``to_derive``) and keeps the copy's heads, and the caller derives
    them once after its last copy with `derive_deferred` (the lake: one escrow in many copies). Until
    then the derived rows, and what is read from them (the copy time, the replay and checkpoint
    disagreements), are not the copy's. `decode_workers`: processes that decode the diffs (None: one
    per core for a copy with at least MIN_WORKER_DIFFS new diffs; 0: this process)."""
    started = time.monotonic()
    progress = progress or (lambda *_: None)
    refuse_absent_columns(store, TABLES)  # a column no row can be read without: refused before anything is written
    refuse_unrelated_escrows(con, store)  # settled escrow ids reused by other escrows: likewise
    remove_stale(con)  # what a killed ingest of this warehouse staged (pipeline/ingest/staging.py)
    heads: list[pl.DataFrame] = []  # (escrow_id, latest_nonce) of every session in the copy
    # The input digest: a SQLite store's files, hashed before reading (the run id derives from it);
    # otherwise the rows as they are read.
    digest_before = input_digest_before(store)
    rows_digest = None if digest_before else RowDigest()
    if rows_digest is not None:
        store = DigestingStore(store, rows_digest)
    with ingest_run(
        con, source_id=store.source_id, kind=store.kind, display=store.display, label=label, input_digest=digest_before
    ) as run:
        summary = IngestSummary(
            run_id=run.run_id, source_id=store.source_id, source_display=store.display, rows=run.rows
        )
        try:
            with ingest_memory(con):  # sized for the connection's threads; the caller's limit again after
                with transaction(con):
                    run.quarantine(_refused_inputs(store, run))
                _ingest_escrow_cache(con, store, run)
                plan = _plan_chunks(con, store, run, summary, heads)
                new_diffs = sum(int(chunk["new_nonces"].sum()) for _, chunk, _ in plan)
                if decode_workers is None and new_diffs < MIN_WORKER_DIFFS:
                    decode_workers = 0  # starting the workers would cost more than they save
                _ingest_chunks(con, store, plan, run, summary, progress, derive, decode_workers)
                for plane in PLANE_INGESTERS:
                    plane(con, store, run)
                if derive:
                    _snapshot_disagreements(con, store.source_id, summary)
            if derive:
                run.copy_at = summary.copy_at = _copy_time(con, heads)
            else:
                summary.heads = heads  # the copy time is read from derived rows: `derive_deferred` sets it
            if rows_digest is not None:
                run.input_digest = rows_digest.hexdigest()
        finally:
            summary.quarantined = run.quarantined
            summary.elapsed_s = time.monotonic() - started
            summary.accounting = run.accounting.rows()
    if derive:  # without its derive, the copy time and findings a stamp keeps are not known yet
        stamp_ingest(con, store, summary)  # what lets the next ingest of an unchanged copy stop at its markers
    return summary


def _plan_chunks(
    con: duckdb.DuckDBPyConnection, store: SessionStore, run: IngestRun, summary: IngestSummary, heads: list
) -> list[tuple[int, pl.DataFrame, dict[str, int]]]:
    """The chunks to read, epoch by epoch: (epoch, the chunk's sessions, the diff cursors). Counts the
    sessions used and held as they are, names the epoch's orphan rows, and adds each epoch's heads."""
    known_epochs = set(fetch_frame(con, "SELECT DISTINCT epoch_id FROM raw_sessions")["epoch_id"].to_list())
    state = {
        r["escrow_id"]: r for r in fetch_frame(con, sql_text("warehouse/ingest/escrow_state.sql")).iter_rows(named=True)
    }
    own = own_cursors(con, store.source_id)  # small: nonce ranges, not nonces
    epoch_sessions, conflicted = _epoch_sessions(con, store, run)
    plan: list[tuple[int, pl.DataFrame, dict[str, int]]] = []  # (epoch, chunk, cursors)
    for epoch_id, sessions in epoch_sessions.items():
        if epoch_id not in known_epochs and sessions.height:
            summary.new_epochs.append(epoch_id)
        heads.append(sessions.select("escrow_id", "latest_nonce"))
        changed, cursors = _changed_escrows(sessions, state, store.source_id, own)
        summary.escrows_changed += len(changed)
        summary.escrows_unchanged += sessions.height - len(changed)
        run.accounting.used("sessions", len(changed))
        run.accounting.deduplicated("sessions", sessions.height - len(changed))  # held as they are
        if changed or epoch_id not in known_epochs:
            _orphans(con, store, epoch_id, sessions["escrow_id"].to_list(), conflicted, run)
        plan += [
            (epoch_id, chunk, cursors)
            for chunk in _chunks(sessions.filter(pl.col("escrow_id").is_in(changed)), cursors)
        ]
    return plan


def _snapshot_disagreements(con: duckdb.DuckDBPyConnection, source_id: str, summary: IngestSummary) -> None:
    """The copy's checkpoints that disagree with the replay (read from the derived rows), into the summary."""
    params = {"source_id": source_id}
    found = fetch_frame(con, sql_text("warehouse/ingest/snapshot_disagreements.sql"), params).row(0, named=True)
    summary.snapshot_disagreements, summary.snapshot_disagreements_imported = found["slots"], found["imported"]


def source_findings(con: duckdb.DuckDBPyConnection, source_id: str) -> dict[str, int]:
    """For `doctor --warehouse`: seal conflicts with other copies and checkpoint disagreements of a source."""
    return fetch_frame(con, sql_text("warehouse/ingest/source_findings.sql"), {"source_id": source_id}).row(
        0, named=True
    )


def _copy_time(con: duckdb.DuckDBPyConnection, heads: list[pl.DataFrame]) -> datetime | None:
    """When the copy was taken, as far as its data tells: the newest event time at the head
    (latest nonce) of any of its escrows. Deterministic, and the same for a no-op re-ingest."""
    if not heads:
        return None
    _register(con, "copy_heads", pl.concat(heads))
    try:
        return con.execute(sql_text("warehouse/ingest/copy_time.sql")).fetchall()[0][0]
    finally:
        con.unregister("copy_heads")


def _set_aside(store: SessionStore, run: IngestRun) -> list[Problem]:
    """The rows the store's reads set aside (typed reading), counted as read and quarantined."""
    rejected = store.take_rejected() if hasattr(store, "take_rejected") else []
    for table, _, _ in rejected:
        run.accounting.read(ACCOUNT_AS.get(table, table), 1)
        run.accounting.quarantined(ACCOUNT_AS.get(table, table), 1)
    return rejected


def _refused_inputs(store: SessionStore, run: IngestRun) -> list[Problem]:
    """What the copy holds and the ingest does not read, named: the store directory's files that are
    not read (each with the reason), the rows of detached partitions, the known tables not read."""
    problems = _files_not_read(store, run) + _detached_rows(store, run) + _views_for_tables(store)
    _note_tables_not_read(store, run)
    _note_columns_not_read(store, run)
    # Columns the ingest reads that the copy lacks (pipeline/sources/store/columns.py): said per table and
    # column, never filled with a default; the rows that need one were set aside by the read.
    for (table, column, needed), parts in absent_columns(store, TABLES).items():
        name = MISSING_COLUMNS_QUARANTINED if needed else MISSING_COLUMNS
        run.accounting.note(name, f"{table}.{column} (in {', '.join(parts)})", unit="columns")
    return problems


def _files_not_read(store: SessionStore, run: IngestRun) -> list[Problem]:
    """The store directory's entries, counted; those not read, each with its reason."""
    files: dict[str, str | None] = getattr(store, "files", {})
    if not files:
        return []
    run.accounting.read("store files", len(files), unit="files")
    run.accounting.used("store files", sum(1 for why in files.values() if why is None))
    refused = [("store_files", name, why) for name, why in files.items() if why is not None]
    run.accounting.quarantined("store files", len(refused))
    return refused


def _detached_rows(store: SessionStore, run: IngestRun) -> list[Problem]:
    """The rows of detached partitions: counted as read and quarantined."""
    problems: list[Problem] = []
    for table, key, why in store.detached_rows() if hasattr(store, "detached_rows") else []:
        run.accounting.read(ACCOUNT_AS.get(table, table), 1)
        run.accounting.quarantined(ACCOUNT_AS.get(table, table), 1)
        problems.append((table, key, why))
    return problems


def _views_for_tables(store: SessionStore) -> list[Problem]:
    """A view in place of a table is never read: named, not skipped."""
    not_a_table = getattr(store, "not_a_table", lambda *_: None)
    problems: list[Problem] = []
    for name, spec in TABLES.items():
        for e in [*store.epochs()] if spec.per_epoch else [None]:
            if name not in REQUIRED_PER_EPOCH and (why := not_a_table(name, e)) is not None:
                problems.append((name, f"epoch {e}" if e is not None else "store", why))
    return problems


def _note_tables_not_read(store: SessionStore, run: IngestRun) -> None:
    where: dict[tuple[str, str], list[str]] = {}
    for table, part, why in store.tables_not_read() if hasattr(store, "tables_not_read") else []:
        where.setdefault((table, why), []).append(part)
    for (table, why), parts in where.items():
        run.accounting.note("tables not read", f"{table} in {', '.join(parts)} ({why})", unit="tables")


def _note_columns_not_read(store: SessionStore, run: IngestRun) -> None:
    """Columns of the tables read that no evidence reads."""
    epochs = [*store.epochs(), None]
    for name, spec in TABLES.items():
        for e in epochs if spec.per_epoch else [None]:
            for column in store.columns(name, e) or []:
                if column not in spec.schema.names:
                    run.accounting.note("columns not read", f"{name}.{column}", unit="columns")


def _ingest_escrow_cache(con: duckdb.DuckDBPyConnection, store: SessionStore, run: IngestRun) -> None:
    cache = _frame(_table(list(store.read("escrow_cache", None)), TABLES["escrow_cache"].schema))
    bad = _set_aside(store, run)
    run.accounting.read("escrow_cache", cache.height)
    cache, dedup, conflicts = settle_claims(cache, ["escrow_id"], "escrow_cache", "_meta.db escrow_cache")
    run.accounting.quarantined("escrow_cache", len(conflicts))
    with transaction(con):
        _register(con, "new_escrow_cache", cache)
        written = con.execute(sql_text("warehouse/ingest/upsert_escrow_cache.sql")).fetchall()[0][0]
        con.unregister("new_escrow_cache")
        run.quarantine(bad + conflicts)
    # An unchanged row is not rewritten: it is held already.
    run.accounting.used("escrow_cache", written)
    run.accounting.deduplicated("escrow_cache", dedup + cache.height - written)
    if written:  # rows written, as for every table: an unchanged cache writes none
        run.count("escrow_cache", written)


def _epoch_sessions(
    con: duckdb.DuckDBPyConnection, store: SessionStore, run: IngestRun
) -> tuple[dict[int, pl.DataFrame], set[str]]:
    """The session rows of every epoch the ingest can use, and the escrows whose session rows conflict.

    Rows that claim one escrow and disagree (in one epoch, or the same escrow in two epochs) are a
    conflict: all of them are quarantined, none is chosen, and the escrow's other rows are named as
    rows without a usable session (`_orphans`)."""
    per_epoch: dict[int, pl.DataFrame] = {}
    problems: list[Problem] = []
    for epoch_id in store.epochs():
        missing = [t for t in REQUIRED_PER_EPOCH if store.columns(t, epoch_id) is None]
        if missing:  # an epoch file or partition without its core tables: report it, ingest the rest
            why = getattr(store, "not_a_table", lambda *_: None)
            problems += [(t, f"epoch {epoch_id}", why(t, epoch_id) or "table missing in this copy") for t in missing]
            continue
        sessions = _frame(_table(list(store.read("sessions", epoch_id)), TABLES["sessions"].schema))
        problems += _set_aside(store, run)
        run.accounting.read("sessions", sessions.height)
        sessions, dedup, conflicts = settle_claims(sessions, ["escrow_id"], "sessions", f"epoch {epoch_id}")
        run.accounting.deduplicated("sessions", dedup)
        run.accounting.quarantined("sessions", len(conflicts))
        problems += conflicts
        per_epoch[epoch_id] = sessions
    conflicted = {key.split(" #")[0] for table, key, _ in problems if table == "sessions" and " #" in key}
    claims: dict[str, list[int]] = {}
    for epoch_id, sessions in per_epoch.items():
        for escrow in sessions["escrow_id"].to_list():
            claims.setdefault(escrow, []).append(epoch_id)
    for escrow, epochs in claims.items():
        if len(epochs) > 1:
            conflicted.add(escrow)
            where = ", ".join(map(str, epochs))
            problems += [
                ("sessions", f"epoch {e}: {escrow}", f"escrow {escrow} has session rows in epochs {where}: none used")
                for e in epochs
            ]
            run.accounting.quarantined("sessions", len(epochs))
    if conflicted:
        per_epoch = {e: s.filter(~pl.col("escrow_id").is_in(sorted(conflicted))) for e, s in per_epoch.items()}
    with transaction(con):
        run.quarantine(problems)
    return per_epoch, conflicted


def _orphans(
    con: duckdb.DuckDBPyConnection,
    store: SessionStore,
    epoch_id: int,
    escrows: list[str],
    conflicted: set[str],
    run: IngestRun,
) -> None:
    """Rows of the epoch's escrow-scoped tables that no usable session row claims: no cursor reads them,
    so they are counted and quarantined by name (a diff without its session, a NULL or bytes escrow id,
    the rows of an escrow whose session rows conflict)."""
    if not hasattr(store, "read_orphans"):
        return
    problems: list[Problem] = []
    for table in ESCROW_SCOPED:
        keys = store.read_orphans(table, epoch_id, escrows)
        for key in keys:
            escrow = key.rsplit("/", len(TABLES[table].key) - 1)[0]
            why = "its session rows conflict (quarantined)" if escrow in conflicted else "no session row claims it"
            problems.append((table, key, f"epoch {epoch_id}: {why}"))
        run.accounting.read(ACCOUNT_AS.get(table, table), len(keys))
        run.accounting.quarantined(ACCOUNT_AS.get(table, table), len(keys))
    if problems:
        with transaction(con):
            run.quarantine(problems)


def _changed_escrows(
    sessions: pl.DataFrame, state: dict, source_id: str, own: dict[str, int]
) -> tuple[list[str], dict[str, int]]:
    """Escrows to read, and their diff cursors: the highest nonce this source already gave (`own`,
    0 for a source new to the escrow). An escrow is read when the copy holds diffs past it (new to
    the warehouse, or to be compared with another copy's), or when its session moved since this
    source stored it; a copy behind the stored one is read too, for the ranges the warehouse lacks."""
    changed, cursors = [], {}
    for s in sessions.iter_rows(named=True):
        escrow_id = s["escrow_id"]
        cursor = int(own.get(escrow_id, 0))
        known = state.get(escrow_id)
        if known is not None and (s["latest_nonce"] or 0) <= cursor:
            stored_here = known["source_id"] == source_id
            same = (known["latest_nonce"], known["status"], known["settled_at"]) == (
                s["latest_nonce"],
                s["status"],
                s["settled_at"],
            )
            if same or not stored_here:
                continue
        changed.append(escrow_id)
        cursors[escrow_id] = cursor
    return changed, cursors


def _chunks(sessions: pl.DataFrame, cursors: dict[str, int]):
    """Groups of escrows with at most CHUNK_NONCES new diffs each (a big escrow is a chunk of its own)."""
    frame = sessions.with_columns(
        new_nonces=(
            pl.col("latest_nonce").fill_null(0)
            - pl.col("escrow_id").replace_strict(cursors, default=0, return_dtype=pl.Int64)
        ).clip(lower_bound=1)
    ).sort("escrow_id")
    yield from _grouped(frame, "new_nonces")


def _grouped(frame: pl.DataFrame, size: str, limit: int | None = None):
    """Consecutive slices of `frame` whose `size` column sums to at most `limit` (default CHUNK_NONCES; a row
    over it alone)."""
    limit = limit or CHUNK_NONCES
    start, total = 0, 0
    for i, n in enumerate(frame[size].to_list()):
        if total and total + n > limit:
            yield frame.slice(start, i - start)
            start, total = i, 0
        total += n
    if start < frame.height:
        yield frame.slice(start)


def _derive(con: duckdb.DuckDBPyConnection, escrow_ids: list[str]) -> DeriveOutcome:
    """The derived rows and the coverage of `escrow_ids`, recomputed (inside the caller's transaction)."""
    from pipeline.ingest.derive import derive_escrows

    derived = derive_escrows(con, escrow_ids)
    refresh_escrow_coverage(con, escrow_ids)
    return derived


def _derive_groups(con: duckdb.DuckDBPyConnection, escrow_ids: list[str], limit: int | None = None) -> list[list[str]]:
    """`escrow_ids` in groups of at most CHUNK_NONCES stored diffs (a big escrow is a group of its own): what one
    derive call holds at once."""
    if not escrow_ids:
        return []
    _register(con, "deferred_escrows", pa.table({"escrow_id": pa.array(sorted(set(escrow_ids)), pa.string())}))
    try:
        held = fetch_frame(con, sql_text("warehouse/ingest/deferred_escrows.sql"))
    finally:
        con.unregister("deferred_escrows")
    return [group["escrow_id"].to_list() for group in _grouped(held, "n", limit)]


def derive_deferred(con: duckdb.DuckDBPyConnection, run: IngestRun, summaries: list[IngestSummary]) -> int:
    """After ingests with ``derive=False``: derive every escrow they left once, in groups of at most
    CHUNK_NONCES stored diffs (each one transaction, its quarantine rows under `run`), then set each
    summary's copy time, and its run's. Returns the escrows derived."""
    escrow_ids = sorted(set().union(*(s.to_derive for s in summaries)))
    for group in _derive_groups(con, escrow_ids):
        with transaction(con):
            derived = _derive(con, group)
            run.quarantine(derived.quarantined)
        run.count("inferences", derived.inferences)
    for summary in summaries:
        summary.copy_at = _copy_time(con, summary.heads)
        with transaction(con):
            con.execute("UPDATE ingest_runs SET copy_at = ? WHERE run_id = ?", [summary.copy_at, summary.run_id])
    return len(escrow_ids)


def _ingest_chunks(con, store, plan, run: IngestRun, summary: IngestSummary, progress, derive, decode_workers) -> None:
    """Each planned chunk read, decoded and settled, in plan order; its diff batches go to the decode workers
    as they are read, so they decode while the other tables are read. A delta of fewer than STAGE_MIN_DIFFS
    new diffs writes and derives its chunks as one (`_write_pending`), in one transaction; a larger one is staged
    (stage 1, pipeline/ingest/staging.py) and written once, then derived, in one transaction (stage 2)."""
    if not plan:
        return
    from pipeline.sources.decode.workers import DiffDecoder  # not loaded for an unchanged copy

    staged = sum(int(chunk["new_nonces"].sum()) for _, chunk, _ in plan) >= STAGE_MIN_DIFFS
    stager = Stager(con) if staged else None
    part_diffs = 0  # new diffs staged in the current part
    pending: list[_ChunkRows] = []  # unstaged: the chunks read and not written yet, at most CHUNK_NONCES diffs
    try:
        with DiffDecoder(decode_workers) as decoder:
            # One chunk at a time: reading the next one while this one is written saved little and held a
            # chunk more at the ingest's peak (bench/BENCHMARKS.md).
            for epoch_id, chunk, cursors in plan:
                progress(f"epoch {epoch_id} diffs", 0, int(chunk["new_nonces"].sum()))
                read = _read_chunk(store, epoch_id, chunk, cursors, decoder, run, progress)
                rows = _settle_chunk(store, read, run, progress)
                if stager is None:
                    if pending and sum(r.counts.diffs for r in pending) + rows.counts.diffs > CHUNK_NONCES:
                        _write_pending(con, pending, run, summary, derive)
                    pending.append(rows)
                    continue
                if part_diffs and part_diffs + rows.counts.diffs > STAGE_PART_DIFFS:
                    stager.next_part()
                    part_diffs = 0
                rows.stage(stager)
                part_diffs += rows.counts.diffs
        if pending:
            _write_pending(con, pending, run, summary, derive)
        if stager is not None:
            stager.finish()
            pa.default_memory_pool().release_unused()  # stage 1's Arrow pages, before stage 2's peak
            for part in range(len(stager.parts)):
                with transaction(con):
                    _write_staged(con, stager, part, run, summary, derive)
    finally:
        if stager is not None:
            stager.close()


@dataclass
class _ChunkRead:
    """What one chunk read from the copy: its diff batches (being decoded) and the other tables' batches."""

    epoch_id: int
    chunk: pl.DataFrame
    decodings: list[tuple[Decoding, int]] = field(default_factory=list)  # (batch being decoded, its rows)
    sealed: list[pa.RecordBatch] = field(default_factory=list)
    obs: list[pa.RecordBatch] = field(default_factory=list)
    snapshots: list[pa.RecordBatch] = field(default_factory=list)
    signatures: list[pa.Table] = field(default_factory=list)
    set_aside: list[Problem] = field(default_factory=list)  # rows the typed reading refused


def _read_chunk(
    store, epoch_id: int, chunk: pl.DataFrame, cursors, decoder: DiffDecoder, run: IngestRun, progress
) -> _ChunkRead:
    """Read a chunk of escrows' rows from the copy; its diff batches go to the decoder as they arrive."""
    read = _ChunkRead(epoch_id, chunk)
    chunk_cursors = {e: cursors[e] for e in chunk["escrow_id"].to_list()}
    batches = {"sealed_inferences": read.sealed, "snapshots": read.snapshots}
    # The sealed and obs rows stream in (on a second connection of the same snapshot, where the
    # store has one) while the diffs are read.
    with store.read_many([(t, epoch_id, chunk_cursors) for t in CHUNK_TABLES]) as streams:
        read.decodings = [(decoder.submit(batch), batch.num_rows) for batch in streams[0]]
        for table, stream in zip(CHUNK_TABLES[1:], streams[1:], strict=True):
            for batch in stream:
                if table == "signatures":
                    read.signatures.append(signature_digests(batch))
                else:
                    batches.get(table, read.obs).append(batch)
                    progress(f"epoch {epoch_id} {table}", batch.num_rows, 0)
    read.set_aside = _set_aside(store, run)
    return read


# The relations a chunk's statements read (registered for one chunk, or staged views of every chunk's),
# each with the `_ChunkRows` attribute that holds it.
RELATIONS = {
    "new_sessions": "sessions",
    "new_diff_digests": "held",
    "new_diffs": "diffs",
    "new_txs": "txs",
    "new_sealed": "sealed",
    "new_obs": "obs",
    "new_snapshots": "snapshots",
    "new_snapshot_host_stats": "host_stats",
    "new_snapshot_model_stats": "model_stats",
    "new_snapshot_live": "live",
    "new_signatures": "signatures",
}
OBS_COLUMNS = ["escrow_id", "inference_id", "slot_id", "epoch_id"]  # what raw_validation_obs keeps


@dataclass
class _Counts:
    """What a write's accounting needs of its relations (one chunk's, or the sum of the staged chunks')."""

    escrow_ids: list[str] = field(default_factory=list)
    sessions: int = 0
    diffs: int = 0
    txs: int = 0
    diff_dedup: int = 0  # diff rows of the copy claiming one key with the same bytes
    sealed: int = 0
    sealed_dedup: int = 0
    snapshots: int = 0
    snapshot_dedup: int = 0
    obs: int = 0
    signatures: int = 0

    def add(self, other: _Counts) -> None:
        self.escrow_ids += other.escrow_ids
        for name in ("sessions", "diffs", "txs", "diff_dedup", "sealed", "sealed_dedup", "snapshots"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("snapshot_dedup", "obs", "signatures"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class _ChunkRows:
    """A chunk's rows read, decoded and settled: the relations its statements write, their counts, and the
    problems found (quarantined with the chunk)."""

    counts: _Counts
    bad: list[Problem]
    sessions: pa.Table
    sealed: pa.Table
    snapshots: pa.Table
    host_stats: pa.Table
    model_stats: pa.Table
    live: pa.Table
    held: pa.Table | None = None
    diffs: pa.Table | None = None
    txs: pa.Table | None = None
    obs: pa.Table | None = None
    signatures: pa.Table | None = None

    def register(self, con: duckdb.DuckDBPyConnection) -> None:
        for name, attr in RELATIONS.items():
            if (table := getattr(self, attr)) is not None:
                if name == "new_txs":
                    # As a stream, read once: DuckDB keeps a registered table until the transaction ends, so the
                    # transactions (the chunk's largest rows) would still be held by the derive, where it peaks.
                    table = pa.RecordBatchReader.from_batches(table.schema, table.to_batches())
                _register(con, name, table)

    def release(self) -> None:
        """Drop the rows (the counts and problems stay)."""
        for attr in set(RELATIONS.values()):
            setattr(self, attr, None)

    def stage(self, stager) -> None:
        """Append the chunk's relations and problems to the staged files (stage 1)."""
        from pipeline.ingest.staging import PROBLEMS

        for name, attr in RELATIONS.items():
            stager.add(name, getattr(self, attr))
        columns = [pa.array([p[i] if p[i] is None else str(p[i]) for p in self.bad], pa.string()) for i in range(3)]
        stager.add(PROBLEMS, pa.table(dict(zip(("table_name", "row_key", "reason"), columns, strict=True))))
        stager.add_counts(self.counts)


def _settle_chunk(store, read: _ChunkRead, run: IngestRun, progress) -> _ChunkRows:
    """Settle a chunk read: its rows counted, claims settled, checkpoints decoded, values checked. Takes the
    read's rows: they are freed with the returned ones."""
    from pipeline.sources.decode.snapshots import decode_snapshots

    acct, epoch_id, chunk = run.accounting, read.epoch_id, read.chunk
    bad = list(read.set_aside)
    decoded = _decoded(read, progress)
    sealed_batches, obs, snapshot_batches, signature_parts = read.sealed, read.obs, read.snapshots, read.signatures
    read.decodings, read.sealed, read.obs, read.snapshots, read.signatures = [], [], [], [], []
    txs, diffs, held, diff_dedup = _settle_chunk_diffs(decoded, acct, bad)
    signatures = pa.concat_tables(signature_parts) if signature_parts else None
    signature_rows = signatures.num_rows if signatures is not None else 0
    acct.read("signatures", signature_rows)
    acct.used("signatures", signature_rows)  # each compared with the other copies' (pipeline/ingest/coverage.py)
    where = f"epoch {epoch_id}"
    sealed, sealed_dedup = _settle_table(
        sealed_batches, "sealed_inferences", ["escrow_id", "inference_id"], where, acct, bad
    )
    checkpoints, snapshot_dedup = _settle_table(snapshot_batches, "snapshots", ["escrow_id"], where, acct, bad)
    snapshots = decode_snapshots(checkpoints)
    acct.quarantined("snapshots", len(snapshots.quarantined))
    bad += [("snapshots", key, reason) for key, reason in snapshots.quarantined]
    bad += _value_checks(chunk, txs, sealed)
    obs_rows = sum(b.num_rows for b in obs)
    acct.read("validation_obs", obs_rows)
    acct.deduplicated("diffs", diff_dedup)
    sessions = chunk.drop("new_nonces").with_columns(source_id=pl.lit(store.source_id), run_id=pl.lit(run.run_id))
    n = snapshots.snapshots.num_rows
    counts = _Counts(
        escrow_ids=chunk["escrow_id"].to_list(),
        sessions=chunk.height,
        diffs=diffs.num_rows if diffs is not None else 0,
        txs=txs.num_rows if txs is not None else 0,
        sealed=sealed.num_rows,
        sealed_dedup=sealed_dedup,
        snapshots=n,
        snapshot_dedup=snapshot_dedup,
        obs=obs_rows,
        signatures=signature_rows,
    )
    return _ChunkRows(
        counts,
        bad,
        sessions=sessions.to_arrow(),
        sealed=sealed,
        snapshots=snapshots.snapshots.append_column("source_id", pa.array([store.source_id] * n, pa.string())),
        host_stats=snapshots.host_stats,
        model_stats=snapshots.model_stats,
        live=snapshots.live,
        held=held if diffs is not None else None,
        diffs=diffs,
        txs=txs,
        obs=pa.Table.from_batches(obs).select(OBS_COLUMNS) if obs else None,
        signatures=signatures if signature_rows else None,
    )


def _write_pending(con, pending: list[_ChunkRows], run: IngestRun, summary: IngestSummary, derive: bool) -> None:
    """Write the chunks `pending` as one (each relation's rows in chunk order, as a staged part's) in one
    transaction, and empty `pending`: the statements' and the derive's fixed costs once, not once a chunk."""
    rows = pending[0]
    if len(pending) > 1:
        counts, bad = _Counts(), []
        for part in pending:
            counts.add(part.counts)
            bad += part.bad
        rows = _ChunkRows(counts, bad, **{attr: _joined(pending, attr) for attr in set(RELATIONS.values())})
        for part in pending:
            part.release()  # the joined tables hold the rows now, and free them before the derive
    pending.clear()
    with transaction(con):
        _write_chunk(con, rows, run, summary, derive)


def _joined(parts: list[_ChunkRows], attr: str) -> pa.Table | None:
    """The chunks' tables `attr` as one, in chunk order, in the first one's schema (as a staged file)."""
    tables = [table for part in parts if (table := getattr(part, attr)) is not None]
    return pa.concat_tables([t.cast(tables[0].schema) for t in tables]) if tables else None


def _write_chunk(con, rows: _ChunkRows, run: IngestRun, summary: IngestSummary, derive: bool) -> None:
    """Write the rows of one chunk, or of chunks joined, and derive their escrows (inside the caller's
    transaction)."""
    rows.register(con)
    try:
        present = {name for name, attr in RELATIONS.items() if getattr(rows, attr) is not None}
        bad = rows.bad + _write_relations(con, run, summary, rows.counts, present)
    finally:
        for name in RELATIONS:
            con.unregister(name)  # a no-op for names this chunk did not register
    # The chunk's rows are freed before the derive (Polars and DuckDB memory, not Arrow's) makes the peak.
    escrow_ids = rows.counts.escrow_ids
    rows.release()
    pa.default_memory_pool().release_unused()
    _derive_written(con, _derive_groups(con, escrow_ids) if derive else [], escrow_ids, run, summary, derive, bad)


def _write_staged(con, stager, part: int, run: IngestRun, summary: IngestSummary, derive: bool) -> None:
    """Stage 2 for one staged part (inside the caller's transaction): each relation written once by the
    statements a chunk runs, the chunks' problems quarantined in chunk order, then the part's escrows derived."""
    from pipeline.ingest.staging import PROBLEMS

    present = {name for name in RELATIONS if stager.staged(part, name)}
    for name in present:
        stager.view(con, part, name)
    try:
        bad = _write_relations(con, run, summary, stager.counts[part], present)
    finally:
        for name in present:
            con.execute(f"DROP VIEW IF EXISTS {name}")
    for problems in stager.row_groups(part, PROBLEMS):
        run.quarantine(_frame(problems))
    escrow_ids = stager.counts[part].escrow_ids
    groups = _derive_groups(con, escrow_ids, STAGE_DERIVE_DIFFS) if derive else []
    _derive_written(con, groups, escrow_ids, run, summary, derive, bad)


def _derive_written(
    con, groups: list[list[str]], escrow_ids: list[str], run: IngestRun, summary: IngestSummary, derive: bool, bad
) -> None:
    """Derive the escrows just written (`escrow_ids`, in `groups`) and quarantine `bad` and the derive's
    problems; without `derive`, leave them to `derive_deferred`."""
    if derive:
        for group in groups:
            derived = _derive(con, group)
            bad += derived.quarantined
            run.count("inferences", derived.inferences)
            summary.disagreements += derived.disagreements
            summary.rule_sets.update((r["escrow_id"], r) for r in derived.rule_sets.iter_rows(named=True))
    else:
        summary.to_derive.update(escrow_ids)
    run.quarantine(bad)


def _write_relations(con, run: IngestRun, summary: IngestSummary, n: _Counts, present: set[str]) -> list[Problem]:
    """The statements that write the relations `new_*` (registered or staged views; `present`: those there
    are) into the warehouse, inside the caller's transaction; counts them. Returns the seal conflicts."""
    acct = run.accounting
    bad = _sealed_conflicts(con, run.source_id, run.run_id)  # against the copies stored before this one
    con.execute(sql_text("warehouse/ingest/upsert_sessions.sql"))
    deduplicated, forked = _write_diffs(con, run, n) if "new_diffs" in present else (0, 0)
    _write_sealed(con, run.source_id, acct, n.sealed, n.sealed_dedup)
    _write_snapshots(con, acct, n.snapshots, n.snapshot_dedup)
    if "new_obs" in present:
        written = scalar(con.execute(sql_text("warehouse/ingest/insert_obs.sql")))
        acct.used("validation_obs", written)
        acct.deduplicated("validation_obs", n.obs - written)  # already held, or in both tables
    if "new_signatures" in present:
        summary.signature_forks += record_copy_signatures(con, run)
    # Diffs of this copy the warehouse already held (the same bytes or a fork), for the run's accounting.
    summary.diffs_deduplicated += deduplicated
    summary.diff_forks += forked
    rows = {"sessions": n.sessions, "diffs": n.diffs, "txs": n.txs, "sealed_inferences": n.sealed}
    rows |= {"validation_obs": n.obs, "snapshots": n.snapshots}
    for table, count in rows.items():
        run.count(table, count)
    return bad


@dataclass
class _Decoded:
    """A chunk's decoded diff batches: transactions, diffs, every diff row's digest, and the diffs refused."""

    txs: list[pa.Table] = field(default_factory=list)
    diffs: list[pa.Table] = field(default_factory=list)
    digests: list[pa.Table] = field(default_factory=list)  # every diff the copy holds, decoded or not
    refused: list[tuple[str, str]] = field(default_factory=list)  # (row key, reason)


def _decoded(read: _ChunkRead, progress) -> _Decoded:
    """The decoders' answers for the chunk's diff batches, in read order."""
    out = _Decoded()
    for decoding, rows in read.decodings:
        decoded = decoding.result()
        out.txs.append(decoded.txs)
        out.diffs.append(decoded.diffs)
        out.digests.append(decoded.held)
        out.refused += decoded.quarantined
        progress(f"epoch {read.epoch_id} diffs", rows, 0)
    return out


def _settle_chunk_diffs(
    decoded: _Decoded, acct, bad: list[Problem]
) -> tuple[pa.Table | None, pa.Table | None, pa.Table | None, int]:
    """The chunk's diffs with their claims settled and counted: (transactions, diffs, the nonces the copy holds
    once each with their digests, rows deduplicated); the rows set aside go to `bad`."""
    from pipeline.sources.decode.txs import EMPTY_DIGEST

    # (escrow_id, nonce, digest) of every diff row read: the claims to settle, and the nonces the copy holds
    claims = _frame(pa.concat_tables(decoded.digests)) if decoded.digests else None
    txs, diffs, diff_dedup, diff_bad = _settle_diffs(claims, decoded.txs, decoded.diffs, decoded.refused)
    acct.read("diffs", claims.height if claims is not None else 0)
    # An empty DiffContent encodes as no bytes: a diff without transactions, used as such and said.
    empty = int((claims["digest"] == EMPTY_DIGEST).sum()) if claims is not None else 0
    acct.flag("diffs", "with an empty txs_proto (diffs without transactions)", empty)
    acct.quarantined("diffs", len(diff_bad))
    bad += diff_bad
    # the nonces the copy holds, once each (rows claiming one key are settled above)
    held = claims.unique(maintain_order=True).to_arrow() if claims is not None else None
    return txs, diffs, held, diff_dedup


def _settle_table(
    batches: list[pa.RecordBatch], table: str, key: list[str], where: str, acct, bad: list[Problem]
) -> tuple[pa.Table, int]:
    """A chunk's rows of `table`, read, counted and settled (`_settled`); the rows set aside go to `bad`.
    Returns the rows and how many were deduplicated."""
    rows = _table(batches, TABLES[table].schema)
    acct.read(table, rows.num_rows)
    rows, dedup, claims = _settled(rows, key, table, where)
    acct.quarantined(table, len(claims))
    bad += claims
    return rows, dedup


def _write_diffs(con, run: IngestRun, n: _Counts) -> tuple[int, int]:
    """The new diffs and their transactions (`new_diffs`, `new_txs`), with the copy's nonce ranges and forks
    recorded (`record_copy_diffs`). Returns the diffs the warehouse held already: (with the same bytes, forked)."""
    acct = run.accounting
    deduplicated, forked = record_copy_diffs(con, run)
    insert = "insert_diffs" if deduplicated or forked else "insert_all_diffs"  # nothing held: no conflict
    written = scalar(con.execute(sql_text(f"warehouse/ingest/{insert}.sql"), {"run_id": run.run_id}))
    acct.used("diffs", written)
    acct.deduplicated("diffs", deduplicated)  # the warehouse held them with the same bytes
    # a fork whose stored version stays (its digest sorts first) is set aside, quarantined with both digests
    acct.quarantined("diffs", n.diffs - written - deduplicated)
    if written == n.diffs:
        con.execute(sql_text("warehouse/ingest/insert_all_txs.sql"))
    else:
        con.execute(sql_text("warehouse/ingest/insert_txs.sql"), {"run_id": run.run_id})
    return deduplicated, forked


def _write_sealed(con, source_id: str, acct, sealed: int, dedup: int) -> None:
    """The sealed rows (`new_sealed`), each kept where it ranks first (upsert_sealed.sql)."""
    held_sealed = scalar(con.execute(sql_text("warehouse/ingest/sealed_held.sql")))
    upsert = "upsert_sealed" if held_sealed else "insert_all_sealed"  # nothing held: nothing to rank against
    written = scalar(con.execute(sql_text(f"warehouse/ingest/{upsert}.sql"), {"source_id": source_id}))
    acct.used("sealed_inferences", written)
    # not written: another copy's seal of the key stays (further along, or a conflict it wins, quarantined)
    acct.deduplicated("sealed_inferences", dedup + sealed - written)


def _write_snapshots(con, acct, snapshots: int, dedup: int) -> None:
    """The decoded checkpoints (`new_snapshots` …) where they are newer than the ones the warehouse holds."""
    winning = scalar(con.execute(sql_text("warehouse/ingest/winning_snapshots.sql")))
    con.execute(sql_text("warehouse/ingest/upsert_snapshots.sql"))
    acct.used("snapshots", winning)  # the others are older than the checkpoint the warehouse holds
    acct.deduplicated("snapshots", dedup + snapshots - winning)


def _settled(rows: pa.Table, key: list[str], table: str, where: str) -> tuple[pa.Table, int, list[Problem]]:
    """`settle_claims` on Arrow rows, which pass through as they are when no key is claimed twice (the
    usual case: only the key columns are looked at, no copy of the rows is made)."""
    keys = _frame(rows.select(key))
    if rows.num_rows < 2 or not keys.select(pl.struct(key).is_duplicated().any()).item():
        return rows, 0, []
    frame, dedup, problems = settle_claims(_frame(rows), key, table, where)
    return frame.to_arrow().cast(rows.schema), dedup, problems


def _settle_diffs(
    claims: pl.DataFrame | None, tx_parts: list[pa.Table], diff_parts: list[pa.Table], decode_bad: list[tuple[str, str]]
) -> tuple[pa.Table | None, pa.Table | None, int, list[Problem]]:
    """The chunk's decoded diffs and transactions with claims settled: diff rows of one key that differ
    are all quarantined (none chosen); identical ones are one row. Returns (txs, diffs, rows
    deduplicated, problems: one per row set aside)."""
    claimed = claims if claims is not None else pl.DataFrame()
    key = ["escrow_id", "nonce"]
    conflicted = pl.DataFrame(schema={"escrow_id": pl.String, "nonce": pl.Int64})
    problems: list[Problem] = []
    if claimed.height and claimed.select(pl.struct(key).is_duplicated().any()).item():
        counts = claimed.unique().group_by(key).len().filter(pl.col("len") > 1).select(key)
        conflicted = claimed.join(counts, on=key, how="semi").group_by(key).len()
        for r in conflicted.iter_rows(named=True):
            label = f"{r['escrow_id']}/{r['nonce']}"
            why = f"{r['len']} diff rows claim {label} and disagree"
            problems += [("diffs", f"{label} #{i + 1}", why) for i in range(r["len"])]
        conflicted = conflicted.select(key)
    gone = {f"{e}/{n}" for e, n in conflicted.iter_rows()}
    problems += [("diffs", k, why) for k, why in decode_bad if k not in gone]
    if not diff_parts:
        return None, None, 0, problems
    diffs, txs = pa.concat_tables(diff_parts), pa.concat_tables(tx_parts)
    frame = _frame(diffs.select(key))
    if not conflicted.height and not frame.select(pl.struct(key).is_duplicated().any()).item():
        return txs, diffs, 0, problems
    kept = _frame(diffs).join(conflicted, on=key, how="anti")
    unique = kept.unique(subset=key, keep="first", maintain_order=True)
    tx_frame = _frame(txs).join(conflicted, on=key, how="anti")
    tx_frame = tx_frame.unique(subset=[*key, "tx_index"], keep="first", maintain_order=True)
    dedup = kept.height - unique.height
    return tx_frame.to_arrow().cast(txs.schema), unique.to_arrow().cast(diffs.schema), dedup, problems


def _sealed_conflicts(con: duckdb.DuckDBPyConnection, source_id: str, run_id: str) -> list[tuple[str, str, str]]:
    """Real seals of this copy that differ from the ones another copy stored: recorded in
    raw_sealed_conflicts and returned as quarantine problems (must run before the sealed upsert)."""
    params = {"source_id": source_id, "run_id": run_id}
    conflicts = fetch_frame(con, sql_text("warehouse/ingest/sealed_conflicts.sql"), params)
    if conflicts.height:
        _register(con, "new_sealed_conflicts", conflicts)
        con.execute("INSERT OR IGNORE INTO raw_sealed_conflicts BY NAME (SELECT * FROM new_sealed_conflicts)")
        con.unregister("new_sealed_conflicts")
    return [
        (
            "sealed_inferences",
            f"{r['escrow_id']}/{r['inference_id']}",
            f"copies disagree on the sealed row: {r['field']} {r['stored']} ({r['stored_source_id']}, kept) "
            f"vs {r['copy']} ({r['copy_source_id']})",
        )
        for r in conflicts.iter_rows(named=True)
    ]


def _value_checks(sessions: pl.DataFrame, txs: pa.Table | None, sealed: pa.Table) -> list[tuple[str, str, str]]:
    """Values outside the known enumerations: kept as they are, and quarantined so they are seen."""
    from pipeline.ingest.derive import STATUS_NAMES

    bad = []
    for s in sessions.filter(~pl.col("status").is_in(list(KNOWN_SESSION_STATUS))).iter_rows(named=True):
        bad.append(("sessions", s["escrow_id"], f"unknown session status {s['status']!r}"))
    sealed_df = _frame(sealed.select(["escrow_id", "inference_id", "sealed_status"]))
    for r in sealed_df.filter((pl.col("sealed_status") < 0) | (pl.col("sealed_status") >= len(STATUS_NAMES))).iter_rows(
        named=True
    ):
        bad.append(
            (
                "sealed_inferences",
                f"{r['escrow_id']}/{r['inference_id']}",
                f"unknown sealed_status {r['sealed_status']}",
            )
        )
    if txs is not None:
        tx = _frame(txs)
        for r in tx.filter((pl.col("kind") == "other") & pl.col("member").str.starts_with("field_")).iter_rows(
            named=True
        ):
            bad.append(
                (
                    "diffs",
                    f"{r['escrow_id']}/{r['nonce']}/{r['tx_index']}",
                    f"unknown tx kind (DevshardTx field {r['field_number']})",
                )
            )
        for r in tx.filter(
            (pl.col("kind") == "timeout") & ~pl.col("timeout_reason").is_in(list(KNOWN_TIMEOUT_REASONS))
        ).iter_rows(named=True):
            bad.append(
                (
                    "diffs",
                    f"{r['escrow_id']}/{r['nonce']}/{r['tx_index']}",
                    f"unknown timeout reason {r['timeout_reason']}",
                )
            )
    return bad
