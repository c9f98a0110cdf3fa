"""Content digests of ingest inputs: what a run read, identified by content, not by where it lay.

- A SQLite store directory: sha256 over every file the ingest may read (epoch files, `_meta.db`,
  `accounting.db`, payloads, WAL files), in the order of their paths relative to the store, each
  as ``path, size, bytes``. The files are only read. `-shm` files are skipped: they are SQLite's
  shared-memory index, not content.
- A PostgreSQL snapshot: sha256 over the rows the run read, in the order it read them: per read and
  column, a digest of the values' lengths (NULL marked apart) and one of their bytes (`RowDigest`),
  so the digest does not depend on where batches happen to split (its cost: bench/BENCHMARKS.md,
  input digests).

- A PostgreSQL copy told unchanged by its change markers (pipeline/ingest/unchanged.py): those markers are all
  the run read, and its digest is theirs (pipeline/sources/store/postgres_markers.py `markers_digest`).

- Log files: sha256 over the sorted sha256 digests of the files' bytes (as stored: a gzipped file by
  its compressed bytes), so neither their paths nor the order they were named in matter. A saved JSON
  response is one such file (`content_digest` of its bytes, read before its run starts).

Inputs whose digest is only known once they are read (log files, hashed beside their parse) enter their
run id through `sample_digest` instead: each file's size and its first and last MiB, so that two
different sets of files do not get one run id, at the cost of 2 MiB read per file.

All are "sha256:<64 hex>"; two machines holding the same copy compute the same digest.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa

PREFIX = "sha256:"
BLOCK = 1 << 20
# Log files are hashed in a thread beside their parse: reading and hashing release the GIL, and a
# large block keeps the hand-overs of the GIL between them rare (with hashlib.file_digest's 256 KiB
# blocks the two threads' contention cost more CPU than the hashing itself).
FILE_BLOCK = 16 << 20


def tree_digest(root: Path) -> str:
    """The digest of the files below ``root`` (see the module docstring)."""
    digest = hashlib.sha256()
    files = sorted(
        (p for p in Path(root).rglob("*") if p.is_file() and not p.name.endswith("-shm")),
        key=lambda p: p.relative_to(root).as_posix(),
    )
    for file in files:
        digest.update(f"{file.relative_to(root).as_posix()}\0{file.stat().st_size}\0".encode())
        with open(file, "rb") as handle:
            while block := handle.read(BLOCK):
                digest.update(block)
    return PREFIX + digest.hexdigest()


def files_digest(paths: list[Path]) -> str:
    """The digest of a set of files by content alone (see the module docstring)."""
    per_file = []
    block = bytearray(FILE_BLOCK)
    for path in paths:
        file_hash = hashlib.sha256()
        with open(path, "rb", buffering=0) as handle:
            while size := handle.readinto(block):
                file_hash.update(memoryview(block)[:size])
        per_file.append(file_hash.hexdigest())
    return _combined(per_file)


def content_digest(contents: list[bytes]) -> str:
    """`files_digest` of files holding `contents`, from the bytes already read."""
    return _combined([hashlib.sha256(data).hexdigest() for data in contents])


def _combined(per_file: list[str]) -> str:
    digest = hashlib.sha256()
    for name in sorted(per_file):
        digest.update(f"{name}\0".encode())
    return PREFIX + digest.hexdigest()


SAMPLE = 1 << 20


def sample_digest(paths: list[Path]) -> str:
    """Per file its size and its first and last MiB (all of a smaller file), combined as `files_digest`
    does: cheap material for a run id that tells different inputs apart before they are read."""
    per_file = []
    for path in paths:
        sample = hashlib.sha256()
        with open(path, "rb", buffering=0) as handle:
            size = os.fstat(handle.fileno()).st_size
            sample.update(f"{size}\0".encode())
            sample.update(handle.read(SAMPLE))
            if size > 2 * SAMPLE:
                handle.seek(size - SAMPLE)
            sample.update(handle.read(SAMPLE))
        per_file.append(sample.hexdigest())
    return _combined(per_file)


class RowDigest:
    """A running sha256 over Arrow batches, column by column, each read under the name it was read as.

    Per read (a run of batches under one name) and per column, two streams are hashed as the
    batches come: the column's shape (per row an int64, little-endian: the value's length in bytes,
    -1 for NULL) and its values' bytes (binary and text as stored, integers as 8-byte little-endian,
    booleans as one byte; NULLs add nothing). Both streams are concatenations, so the digest does not
    depend on where batches happen to split. When a read ends, its name and each column's name and
    two stream digests feed the run's sha256. Whole buffers are hashed, not values, so this costs
    about what reading the bytes once does (bench/BENCHMARKS.md, input digests)."""

    def __init__(self) -> None:
        self._digest = hashlib.sha256()
        self._name: str | None = None
        self._columns: dict[str, tuple[Any, Any]] = {}  # column -> (shape hash, values hash) of the current read

    def update(self, name: str, batch: pa.RecordBatch) -> None:
        if name != self._name:  # a new read begins, not per batch
            self._end_read()
            self._digest.update(f"\0{name}\0".encode())
            self._name = name
        if not batch.num_rows:  # adds nothing: a read of no batch and one of an empty batch are the same
            return
        for field, column in zip(batch.schema, batch.columns, strict=True):
            if field.name not in self._columns:
                self._columns[field.name] = (hashlib.sha256(), hashlib.sha256())
            shape, values = self._columns[field.name]
            column_shape, column_values = _column_streams(column)
            shape.update(column_shape)
            values.update(column_values)

    def _end_read(self) -> None:
        for name, (shape, values) in self._columns.items():
            self._digest.update(f"{name}\0".encode() + shape.digest() + values.digest())
        self._columns = {}

    def hexdigest(self) -> str:
        """The digest of everything read so far (a read still going on ends here)."""
        self._end_read()
        self._name = None
        return PREFIX + self._digest.hexdigest()


def _column_streams(column: pa.Array) -> tuple[Any, Any]:
    """A column's shape stream (int64 per row: length in bytes, -1 for NULL) and its values' bytes."""
    import numpy as np  # here: a SQLite store's or a log file's digest needs neither

    from pipeline.core.arrowbuf import BYTE_TYPES, value_bytes

    kind = column.type
    if pa.types.is_boolean(kind):
        column, kind = column.cast(pa.uint8()), pa.uint8()
    if pa.types.is_integer(kind):
        width = 1 if kind.bit_width == 8 else 8
        lengths = np.where(column.is_null().to_numpy(zero_copy_only=False), -1, width)
        values = column.drop_null().to_numpy(zero_copy_only=False)
        return lengths.astype("<i8"), np.ascontiguousarray(values, dtype="<u1" if width == 1 else "<i8")
    if kind not in BYTE_TYPES:
        column = column.cast(pa.string())  # any other type by its text (none is read today)
    offsets, data = value_bytes(column)
    lengths = np.diff(offsets).astype("<i8")
    if column.null_count:
        lengths[column.is_null().to_numpy(zero_copy_only=False)] = -1
    return lengths, data[offsets[0] : offsets[-1]]


class DigestingStore:
    """A session store whose reads also feed a `RowDigest`; everything else is the store's own."""

    def __init__(self, store: Any, digest: RowDigest):
        self._store = store
        self.digest = digest

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def _hashed(self, name: str, batches) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            self.digest.update(name, batch)
            yield batch

    def read(self, table: str, epoch_id: int | None, *args: Any, **kwargs: Any) -> Iterator[pa.RecordBatch]:
        return self._hashed(f"{table}/{epoch_id}", self._store.read(table, epoch_id, *args, **kwargs))

    def query_batches(self, sql: str, *args: Any, **kwargs: Any) -> Iterator[pa.RecordBatch]:
        return self._hashed(sql, self._store.query_batches(sql, *args, **kwargs))

    @contextmanager
    def read_many(self, requests, *args: Any, **kwargs: Any):
        # The streams are consumed one after another by the ingest, so hashing them in
        # request order is reading order.
        with self._store.read_many(requests, *args, **kwargs) as streams:
            yield [self._hashed(f"{t}/{e}", s) for (t, e, _), s in zip(requests, streams, strict=True)]


def input_digest_before(store: Any) -> str | None:
    """The digest of a copy that can be known before reading it: a SQLite store's files, or the digest a
    store states (`input_digest`: a copy in the network lake carries the one its stage-1 read computed)."""
    if stated := getattr(store, "input_digest", None):
        return stated
    return tree_digest(store.path) if getattr(store, "kind", None) == "sqlite" else None
