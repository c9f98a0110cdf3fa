"""Content digests of ingest inputs: what a run read, identified by content, not by where it lay.

- A SQLite store directory: sha256 over every file the ingest may read (epoch files, `_meta.db`,
  `accounting.db`, payloads, WAL files), in the order of their paths relative to the store, each
  as ``path, size, bytes``. The files are only read. `-shm` files are skipped: they are SQLite's
  shared-memory index, not content.
- A PostgreSQL snapshot: sha256 over the rows the run read, in the order it read them. Each Arrow
  batch is hashed row by row in DuckDB (per row: an md5 over its values, binary ones by their md5,
  the others as text, NULL marked apart), and the row hashes feed the sha256 in order, so the
  digest does not depend on where batches happen to split (its cost: bench/BENCHMARKS.md, input digests).

- A PostgreSQL copy told unchanged by its change markers (pipeline/ingest/unchanged.py): those markers are all
  the run read, and its digest is theirs (pipeline/sources/store/postgres_markers.py `markers_digest`).

- Log files: sha256 over the sorted sha256 digests of the files' bytes (as stored: a gzipped file by
  its compressed bytes), so neither their paths nor the order they were named in matter.

All are "sha256:<64 hex>"; two machines holding the same copy compute the same digest.
"""

from __future__ import annotations

import hashlib
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
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
    digest = hashlib.sha256()
    for name in sorted(per_file):
        digest.update(f"{name}\0".encode())
    return PREFIX + digest.hexdigest()


class RowDigest:
    """A running sha256 over Arrow batches, row by row, each batch under the name it was read as.

    The hashing runs on one thread of its own, in the order the batches came: DuckDB releases the GIL
    while it hashes, so this overlaps the reader's decoding instead of adding to it."""

    def __init__(self, con: duckdb.DuckDBPyConnection | None = None) -> None:
        """Hashes on a cursor of `con` (the ingest's warehouse; only the batches are read) when given,
        else on a private in-memory database, whose start is a noticeable share of a no-op ingest
        (bench/BENCHMARKS.md). The row hashes come back in scan order on any number of
        threads, as DuckDB keeps the order of a query without ORDER BY (`preserve_insertion_order`,
        on by default and never turned off here)."""
        self._digest = hashlib.sha256()
        self._name: str | None = None
        self._con = con.cursor() if con is not None else duckdb.connect()
        self._pending: queue.Queue[bytes | pa.RecordBatch | None] = queue.Queue(maxsize=2)  # bounds batches held
        self._error: BaseException | None = None
        self._worker: threading.Thread | None = None

    def update(self, name: str, batch: pa.RecordBatch) -> None:
        if name != self._name:  # a header where a new read begins, not per batch
            self._put(f"\0{name}\0".encode())
            self._name = name
        if batch.num_rows:
            self._put(batch)

    def _put(self, item: bytes | pa.RecordBatch) -> None:
        if self._worker is None:
            self._worker = threading.Thread(target=self._run, name="row-digest", daemon=True)
            self._worker.start()
        self._pending.put(item)

    def _run(self) -> None:
        while (item := self._pending.get()) is not None:
            if self._error is not None:
                continue  # drain: the error is raised by the reader's next hexdigest/close
            try:
                self._digest.update(item if isinstance(item, bytes) else self._row_hashes(item))
            except BaseException as exc:  # noqa: BLE001 - handed to the reader's thread
                self._error = exc

    def _row_hashes(self, batch: pa.RecordBatch) -> memoryview:
        """The batch's row hashes, concatenated as text: the values buffer of the hash column."""
        self._con.register("batch", batch)
        try:
            hashes = self._con.sql(f"SELECT {_row_hash(batch.schema)} FROM batch").to_arrow_table().column(0)
        finally:
            self._con.unregister("batch")
        text = pa.concat_arrays(hashes.chunks).cast(pa.large_string())
        offsets = memoryview(text.buffers()[1]).cast("q")  # int64 offsets of the rows' text in the values buffer
        return memoryview(text.buffers()[2])[offsets[text.offset] : offsets[text.offset + len(text)]]

    def _finish(self) -> None:
        if self._worker is not None:
            self._pending.put(None)
            self._worker.join()
            self._worker = None

    def hexdigest(self) -> str:
        self._finish()
        if self._error is not None:
            raise self._error
        return PREFIX + self._digest.hexdigest()

    def close(self) -> None:
        """Stop the hashing thread (a failure in it is raised by `hexdigest`, not here) and the cursor."""
        self._finish()
        self._con.close()


def _row_hash(schema: pa.Schema) -> str:
    """The SQL of one row's hash: md5 over its values in column order ('v' + value, or 'n' for NULL)."""
    values = []
    for field in schema:
        column = '"' + field.name.replace('"', '""') + '"'
        binary = pa.types.is_binary(field.type) or pa.types.is_large_binary(field.type)
        text = f"md5({column})" if binary else f"CAST({column} AS VARCHAR)"
        values.append(f"coalesce('v' || {text}, 'n')")
    return f"md5(concat_ws(chr(31), {', '.join(values)}))"


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
