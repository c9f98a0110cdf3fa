"""Stage 1 of the lake: one copy (any layout or release line the ingest reads) written as raw Parquet rows.

Reads the copy through the same store readers as `gonka-evidence ingest` (pipeline/sources/store), so
every layout and release line the ingest knows arrives in the canonical shape; adds each row's bucket
(and each diff's digest) and writes one file per (table, epoch, bucket) of this copy. Nothing is
decoded here: decoding happens once per distinct diff, in the partition (pipeline/network/partition.py).
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.core.digest import DigestingStore, RowDigest, input_digest_before
from pipeline.network.lake import CACHE_ENTRY, EPOCH_TABLES, CopyManifest, Lake, bucket_of, copy_id_of
from pipeline.sources.store import open_store

DIGEST = "diff_digest"  # md5 of txs_proto, the identity of a diff's bytes
DIFF_BYTES = "diff_bytes"  # its length, so that dedupe counts bytes without reading them


@dataclass
class CopyWritten:
    """What one stage-1 task did (returned to the client)."""

    copy_id: str
    label: str
    bytes_read: int
    rows: dict[str, int]
    files: int


def copy_label(spec: str, display: str) -> str:
    """A copy's default label: the store directory's name, or the redacted URL."""
    return Path(spec).name if not spec.startswith(("postgres:", "postgresql:")) and spec != "postgres" else display


class _Writers:
    """One Parquet writer per (table, epoch, bucket) of the copy, under the lake's temporary directory."""

    def __init__(self, lake: Lake, copy_id: str, generation: str):
        self.lake, self.name = lake, f"{copy_id}-{generation}.parquet"
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
    """Stage 1 for one copy (a PostgreSQL URL or a SQLite store directory): its raw rows into the lake."""
    lake = Lake(lake_root)
    store = open_store(spec)
    try:
        label = copy_label(spec, store.display)
        copy_id = copy_id_of(store.display)
        digest_before = input_digest_before(store)
        rows_digest = None if digest_before else RowDigest()
        reader = DigestingStore(store, rows_digest) if rows_digest is not None else store
        generation = uuid.uuid4().hex[:12]
        writers = _Writers(lake, copy_id, generation)
        manifest = CopyManifest(
            copy_id=copy_id,
            label=label,
            display=store.display,
            source_id=store.source_id,
            source_kind=store.kind,
            input_digest=digest_before,
            generation=generation,
        )
        try:
            _write_rows(lake, reader, manifest, writers)
            manifest.files = writers.close()
        except BaseException:
            writers.abandon()
            raise
        if rows_digest is not None:
            manifest.input_digest = rows_digest.hexdigest()
    finally:
        store.close()
    lake.save_manifest(manifest)  # the switch to this generation
    for path in lake.stale_files(copy_id):  # its earlier generations (other copies may be mid-write)
        path.unlink(missing_ok=True)
    return CopyWritten(copy_id, label, manifest.bytes_read, manifest.rows, len(manifest.files))


def _write_rows(lake: Lake, store, manifest: CopyManifest, writers: _Writers) -> None:
    buckets: dict[str, int] = {}

    def bucket(escrow_id: str) -> int:
        if escrow_id not in buckets:
            buckets[escrow_id] = bucket_of(escrow_id, lake.buckets)
        return buckets[escrow_id]

    def put(table: str, batch: pa.RecordBatch, epochs: pa.Array) -> None:
        manifest.bytes_read += batch.nbytes
        manifest.rows[table] = manifest.rows.get(table, 0) + batch.num_rows
        if batch.num_rows == 0:
            return
        if table == "diffs":
            digests = [
                hashlib.md5(b).digest() if b is not None else None for b in batch.column("txs_proto").to_pylist()
            ]
            batch = batch.append_column(DIGEST, pa.array(digests, pa.binary()))
            batch = batch.append_column(DIFF_BYTES, pc.binary_length(batch.column("txs_proto")).cast(pa.int64()))
        keys = pa.array([bucket(e) for e in batch.column("escrow_id").to_pylist()], pa.int64())
        for epoch, key in sorted(set(zip(epochs.to_pylist(), keys.to_pylist(), strict=True))):
            mask = pc.and_(pc.equal(epochs, epoch), pc.equal(keys, key))
            writers.write(table, epoch, key, batch.filter(mask))

    epoch_of: dict[str, int] = {}  # escrow -> the epoch of its session, for the escrow cache
    for epoch in store.epochs():
        for table in EPOCH_TABLES:
            if store.columns(table, epoch) is None:
                continue
            manifest.tables.append(f"{table}/{epoch}")
            for batch in store.read(table, epoch):
                if table == "sessions":
                    epoch_of.update(dict.fromkeys(batch.column("escrow_id").to_pylist(), epoch))
                put(table, batch, pa.array([epoch] * batch.num_rows, pa.int64()))
    if store.columns("escrow_cache", None) is not None:
        manifest.tables.append(CACHE_ENTRY)
        for batch in store.read("escrow_cache", None):
            ids, stated = batch.column("escrow_id").to_pylist(), batch.column("epoch_id").to_pylist()
            # An escrow's cache row goes with its session; a row of an escrow without a session
            # with the epoch it states (none: it concerns no partition and is left out).
            epochs = [epoch_of.get(e, s) for e, s in zip(ids, stated, strict=True)]
            keep = pa.array([e is not None for e in epochs])
            kept = batch.filter(keep)
            put("escrow_cache", kept, pa.array([e for e in epochs if e is not None], pa.int64()))
    manifest.tables = sorted(set(manifest.tables))
