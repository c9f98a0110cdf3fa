"""Stage 1 of the lake: one copy (any layout or release line the ingest reads) written as raw Parquet rows.

Reads the copy through the same store readers as `gonka-evidence ingest` (pipeline/sources/store), so
every layout and release line the ingest knows arrives in the canonical shape; adds each row's bucket
(and each diff's digest) and writes one file per (table, epoch, bucket) of this copy. Nothing is
decoded here: decoding happens once per distinct diff, in the partition (pipeline/network/partition.py).

A large copy is read in pieces, each a task: the rows of one range of escrow ids (in the store's own
order, every table and epoch), cut from the copy's sessions so that the pieces hold about the same
diffs (`plan_copy`, `cut_copy`). Each piece writes its own files (`<copy>-<generation>-p<i>.parquet`);
once all of them are written, the copy's manifest names their files together (`commit_copy`), so a
partition reads the same rows of the copy however it was cut.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.core.digest import PREFIX, DigestingStore, RowDigest, input_digest_before
from pipeline.network.lake import (
    CACHE_ENTRY,
    EPOCH_TABLES,
    LAKE_TABLES,
    REJECTED,
    CopyManifest,
    Lake,
    bucket_of,
    copy_id_of,
)
from pipeline.sources.store import open_store
from pipeline.sources.store.base import TABLES, EscrowRange
from pipeline.sources.store.columns import refuse_absent_columns

DIGEST = "diff_digest"  # md5 of txs_proto, the identity of a diff's bytes
DIFF_BYTES = "diff_bytes"  # its length, so that dedupe counts bytes without reading them


@dataclass
class CopyWritten:
    """What stage 1 did for one copy (all of its pieces)."""

    copy_id: str
    label: str
    bytes_read: int
    rows: dict[str, int]
    files: int
    absent_columns: dict[str, list[str]] = field(default_factory=dict)  # "table/epoch" -> columns it lacks

    def missing(self) -> str:
        """The copy's columns the ingest reads and it lacks, per table and column with their epochs ('' if none)."""
        found: dict[str, list[str]] = {}
        for entry, columns in self.absent_columns.items():
            table, _, epoch = entry.partition("/")
            for column in columns:
                found.setdefault(f"{table}.{column}", []).append("all" if epoch == "all" else f"epoch {epoch}")
        return "; ".join(f"{name} (in {', '.join(dict.fromkeys(at))})" for name, at in sorted(found.items()))


def copy_label(spec: str, display: str) -> str:
    """A copy's default label: the store directory's name, or the redacted URL."""
    return Path(spec).name if not spec.startswith(("postgres:", "postgresql:")) and spec != "postgres" else display


@dataclass(frozen=True)
class CopyPiece:
    """One stage-1 task of a copy: the rows of the escrows in [low, below) (None: no bound)."""

    index: int
    count: int
    generation: str
    low: str | None = None
    below: str | None = None
    weight: int = 0  # the diffs its sessions state: the task's size, for the order of submission

    @property
    def escrows(self) -> EscrowRange | None:
        return None if self.count == 1 else (self.low, self.below)


@dataclass
class CopyPlan:
    """What `plan_copy` learns of a copy: its escrows in the store's order, each with its diffs."""

    spec: str
    escrows: list[tuple[str, int]]
    whole: bool = False  # read in one piece all the same

    @property
    def weight(self) -> int:
        return sum(n for _, n in self.escrows)


@dataclass
class PieceWritten:
    """What one piece wrote (returned to the client, which commits the copy once every piece is in)."""

    piece: CopyPiece
    manifest: CopyManifest
    rows_digest: str | None  # a PostgreSQL copy: the digest of the rows this piece read


def plan_copy(spec: str) -> CopyPlan:
    """A task: the escrows of a copy with their diff counts, from its sessions (a store that cannot tell
    gives none, and the copy is read whole)."""
    store = open_store(spec)
    try:
        weigh = getattr(store, "escrow_weights", None)
        # A SQLite store with a write-ahead log or journal is read from a private copy of its files,
        # which each piece would make again.
        path = getattr(store, "path", None) if store.kind == "sqlite" else None
        live = path is not None and any(p.name.endswith(("-wal", "-journal")) for p in Path(path).iterdir())
        return CopyPlan(spec, weigh() if weigh is not None else [], whole=live)
    finally:
        store.close()


def cut_copy(plan: CopyPlan, pieces: int, generation: str) -> list[CopyPiece]:
    """`plan`'s copy in at most `pieces` ranges of consecutive escrows holding about the same diffs (an
    escrow is never cut: one larger than a share is a piece of its own)."""
    total = plan.weight
    pieces = 1 if plan.whole else max(1, min(pieces, len(plan.escrows)))
    if pieces == 1:
        return [CopyPiece(0, 1, generation, weight=total)]
    bounds: list[str] = []
    weights, done, start = [0], 0, 0  # start: the diffs before the current piece
    for escrow, n in plan.escrows:
        # A piece ends before the escrow whose middle lies past its share of the diffs left, so that an
        # escrow larger than a share leaves the rest to be shared by the pieces after it.
        share = (total - start) / (pieces - len(bounds))
        if done > start and len(bounds) < pieces - 1 and done + n / 2 - start >= share:
            bounds.append(escrow)
            weights.append(0)
            start = done
        done += n
        weights[-1] += n
    edges = [None, *bounds, None]
    return [
        CopyPiece(i, len(bounds) + 1, generation, edges[i], edges[i + 1], weights[i]) for i in range(len(bounds) + 1)
    ]


class _Writers:
    """One Parquet writer per (table, epoch, bucket) of the copy, under the lake's temporary directory."""

    def __init__(self, lake: Lake, copy_id: str, piece: CopyPiece):
        suffix = f"-p{piece.index}" if piece.count > 1 else ""
        self.lake, self.name = lake, f"{copy_id}-{piece.generation}{suffix}.parquet"
        self.open: dict[tuple[str, int, int], tuple[pq.ParquetWriter, Path, Path]] = {}

    def write(self, table: str, epoch: int, bucket: int, batch: pa.RecordBatch) -> None:
        key = (table, epoch, bucket)
        if key not in self.open:
            final = self.lake.partition_dir(table, epoch, bucket) / self.name
            tmp = self.lake.tmp / f"{table}-{epoch}-{bucket}-{self.name}.{uuid.uuid4().hex}.tmp"
            tmp.parent.mkdir(parents=True, exist_ok=True)
            self.open[key] = (pq.ParquetWriter(tmp, batch.schema, compression="zstd"), tmp, final)
        self.open[key][0].write_batch(batch)

    def close(self) -> list[str]:
        """Close every writer and move its file into place; returns the paths relative to the lake."""
        placed = []
        for writer, tmp, final in self.open.values():
            writer.close()
            final.parent.mkdir(parents=True, exist_ok=True)
            tmp.replace(final)
            placed.append(final.relative_to(self.lake.root).as_posix())
        return sorted(placed)

    def abandon(self) -> None:
        for writer, tmp, _ in self.open.values():
            writer.close()
            tmp.unlink(missing_ok=True)


def write_copy(lake_root: str, spec: str) -> CopyWritten:
    """Stage 1 for one copy (a PostgreSQL URL or a SQLite store directory), whole: its raw rows into the lake."""
    piece = CopyPiece(0, 1, uuid.uuid4().hex[:12])
    return commit_copy(lake_root, [write_piece(lake_root, spec, piece)])


def write_piece(lake_root: str, spec: str, piece: CopyPiece) -> PieceWritten:
    """A stage-1 task: the rows of one piece of a copy into the lake, under the piece's own file names; the
    copy's manifest is written by `commit_copy`. A piece run again writes the same files."""
    lake = Lake(lake_root)
    store = open_store(spec)
    try:
        label = copy_label(spec, store.display)
        copy_id = copy_id_of(store.display)
        # A SQLite store's digest is over its files: the first piece computes it, once for the copy.
        digest_before = input_digest_before(store) if piece.index == 0 or store.kind != "sqlite" else None
        hashed = piece.index == 0 or store.kind != "sqlite"
        rows_digest = RowDigest() if hashed and not digest_before else None
        reader = DigestingStore(store, rows_digest) if rows_digest is not None else store
        refuse_absent_columns(store, TABLES)  # as the ingest: a column no row can be read without, before any file
        writers = _Writers(lake, copy_id, piece)
        manifest = CopyManifest(
            copy_id=copy_id,
            label=label,
            display=store.display,
            source_id=store.source_id,
            source_kind=store.kind,
            input_digest=digest_before,
            generation=piece.generation,
        )
        try:
            _write_rows(lake, reader, manifest, writers, piece.escrows, scan=store)
            manifest.files = writers.close()
        except BaseException:
            writers.abandon()
            raise
    finally:
        store.close()
    return PieceWritten(piece, manifest, rows_digest.hexdigest() if rows_digest is not None else None)


def commit_copy(lake_root: str, pieces: list[PieceWritten]) -> CopyWritten:
    """The copy of `pieces` (all of its pieces, every one written) switched to their files: one manifest
    naming them all, then its earlier generations deleted."""
    lake = Lake(lake_root)
    pieces = sorted(pieces, key=lambda p: p.piece.index)
    first = pieces[0].manifest
    manifest = CopyManifest(
        **{
            **asdict(first),
            "bytes_read": 0,
            "rows": {},
            "tables": [],
            "files": [],
            "split_escrows": {},
            "absent_columns": {},
        }
    )
    for written in pieces:
        part = written.manifest
        manifest.bytes_read += part.bytes_read
        for table, n in part.rows.items():
            manifest.rows[table] = manifest.rows.get(table, 0) + n
        manifest.tables += part.tables
        manifest.files += part.files
        manifest.split_escrows.update(part.split_escrows)  # a piece holds every epoch of its escrows
        manifest.absent_columns.update(part.absent_columns)
    manifest.tables, manifest.files = sorted(set(manifest.tables)), sorted(manifest.files)
    manifest.rows = {t: manifest.rows[t] for t in LAKE_TABLES if t in manifest.rows}  # one order, however cut
    if manifest.input_digest is None:  # the rows read (PostgreSQL): of the copy, or of each piece in order
        digests = [p.rows_digest for p in pieces]
        if len(pieces) == 1:
            manifest.input_digest = digests[0]
        else:
            ranges = "".join(f"{p.piece.low or ''}\0{p.piece.below or ''}\0{p.rows_digest}\0" for p in pieces)
            manifest.input_digest = PREFIX + hashlib.sha256(ranges.encode()).hexdigest()
    lake.save_manifest(manifest)  # the switch to this generation
    for path in lake.stale_files(manifest.copy_id):  # its earlier generations (other copies may be mid-write)
        path.unlink(missing_ok=True)
    return CopyWritten(
        manifest.copy_id,
        manifest.label,
        manifest.bytes_read,
        manifest.rows,
        len(manifest.files),
        manifest.absent_columns,
    )


def _split_escrows(store, kw: dict) -> dict[str, list[int]]:
    """The escrows with session rows in more than one epoch of the copy, with those epochs."""
    epochs: dict[str, set[int]] = {}
    for epoch in store.epochs():
        if store.columns("sessions", epoch) is not None:
            for batch in store.read("sessions", epoch, **kw):
                for escrow in batch.column("escrow_id").to_pylist():
                    epochs.setdefault(escrow, set()).add(epoch)
    if hasattr(store, "take_rejected"):
        store.take_rejected()  # the rows this scan set aside are set aside again by the read that writes them
    return {escrow: sorted(found) for escrow, found in sorted(epochs.items()) if len(found) > 1}


def _write_rows(
    lake: Lake, store, manifest: CopyManifest, writers: _Writers, escrows: EscrowRange | None, scan=None
) -> None:
    """The copy's rows (of the escrows in `escrows`) into the writers; `scan`, the store unhashed, finds the
    escrows whose sessions lie in two epochs: all their rows go to the partition of their first epoch."""
    kw = {"escrows": escrows} if escrows is not None else {}  # a piece: its escrows' rows only
    manifest.split_escrows = _split_escrows(scan if scan is not None else store, kw)
    rows = _RowsOfCopy(lake, store, manifest, writers)
    for epoch in store.epochs():
        for table in EPOCH_TABLES:
            if not rows.held(table, epoch):
                continue
            manifest.tables.append(f"{table}/{epoch}")
            for batch in store.read(table, epoch, **kw):
                if table == "sessions":
                    rows.epoch_of.update({e: rows.home.get(e, epoch) for e in batch.column("escrow_id").to_pylist()})
                rows.put(table, batch, pa.array([epoch] * batch.num_rows, pa.int64()))
            rows.set_aside(epoch)
    if rows.held("escrow_cache", None):
        manifest.tables.append(CACHE_ENTRY)
        for batch in store.read("escrow_cache", None, **kw):
            ids, stated = batch.column("escrow_id").to_pylist(), batch.column("epoch_id").to_pylist()
            # An escrow's cache row goes with its session; a row of an escrow without a session
            # with the epoch it states (none: it concerns no partition and is left out).
            epochs = [rows.epoch_of.get(e, s) for e, s in zip(ids, stated, strict=True)]
            keep = pa.array([e is not None for e in epochs])
            rows.put("escrow_cache", batch.filter(keep), pa.array([e for e in epochs if e is not None], pa.int64()))
        rows.set_aside(None)
    manifest.tables = sorted(set(manifest.tables))


class _RowsOfCopy:
    """Where `_write_rows` puts each batch: the partition (epoch, bucket) of its escrow."""

    def __init__(self, lake: Lake, store, manifest: CopyManifest, writers: _Writers):
        self.lake, self.store, self.manifest, self.writers = lake, store, manifest, writers
        self.home = {escrow: found[0] for escrow, found in manifest.split_escrows.items()}
        self.epoch_of: dict[str, int] = {}  # escrow -> the epoch of its session, for the escrow cache
        self._buckets: dict[str, int] = {}

    def bucket(self, escrow_id: str) -> int:
        if escrow_id not in self._buckets:
            self._buckets[escrow_id] = bucket_of(escrow_id, self.lake.buckets)
        return self._buckets[escrow_id]

    def put(self, table: str, batch: pa.RecordBatch, epochs: pa.Array) -> None:
        self.manifest.bytes_read += batch.nbytes
        self.manifest.rows[table] = self.manifest.rows.get(table, 0) + batch.num_rows
        if batch.num_rows == 0:
            return
        if table == "diffs":
            digests = [
                hashlib.md5(b).digest() if b is not None else None for b in batch.column("txs_proto").to_pylist()
            ]
            batch = batch.append_column(DIGEST, pa.array(digests, pa.binary()))
            batch = batch.append_column(DIFF_BYTES, pc.binary_length(batch.column("txs_proto")).cast(pa.int64()))
        ids = batch.column("escrow_id").to_pylist()
        keys = pa.array([self.bucket(e) for e in ids], pa.int64())
        if self.home:  # a split escrow's rows, of every epoch, in the partition of its first epoch
            epochs = pa.array([self.home.get(e, ep) for e, ep in zip(ids, epochs.to_pylist(), strict=True)], pa.int64())
        for epoch, key in sorted(set(zip(epochs.to_pylist(), keys.to_pylist(), strict=True))):
            mask = pc.and_(pc.equal(epochs, epoch), pc.equal(keys, key))
            self.writers.write(table, epoch, key, batch.filter(mask))

    def set_aside(self, epoch: int | None) -> None:
        """The rows the last read set aside, into the partition of their escrow, whose ingest quarantines
        them as a single warehouse does (a cache row of an escrow without a session: left out, as above)."""
        rows: dict[tuple[int, int], list[tuple[str, str, str]]] = {}
        taken = self.store.take_rejected() if hasattr(self.store, "take_rejected") else []
        for table, key, why in taken:
            escrow = key.rsplit("/", len(TABLES[table].key) - 1)[0] if table in TABLES else key
            at = self.home.get(escrow, epoch) if epoch is not None else self.epoch_of.get(escrow)
            if at is not None:
                rows.setdefault((at, self.bucket(escrow)), []).append((table, key, why))
        for (at, key), found in sorted(rows.items()):
            names = ("table_name", "row_key", "reason")
            batch = pa.RecordBatch.from_arrays([pa.array(c, pa.string()) for c in zip(*found, strict=True)], names)
            self.writers.write(REJECTED, at, key, batch)

    def held(self, table: str, epoch: int | None) -> bool:
        """Whether the copy has the table; its columns the ingest reads and it lacks, in the manifest."""
        present = self.store.columns(table, epoch)
        if present is not None:
            absent = [c for c in TABLES[table].schema.names if c not in present and c != "epoch_id"]
            if absent:
                self.manifest.absent_columns[CACHE_ENTRY if epoch is None else f"{table}/{epoch}"] = absent
        return present is not None
